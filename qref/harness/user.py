"""Your own backend under the harness: ``qref run --callable MODULE:FUNCTION --family F`` and
``qref.harness.check(fn, family=F)`` (docs/user-backends.md).

Calling convention (every family): ``fn(operation, inputs, spec) -> outputs``.

- ``operation``: the case's operation ("encode", "decode", "quantize", "uniform_quantize", "block_quantize", ...);
- ``inputs``: name -> numpy array (copies; e.g. {"x": ...}, {"codes": ...});
- ``spec``: plain data describing the case: {"id", "format" (the element format record), "policy" (the resolved
  cast policy record), "scheme" (the scheme spec: storage, scales, zero points, block size, axis...), "params"};
- ``outputs``: name -> array, named as the case's expected outputs ("codes", "y", "scales", ...; a subset is
  compared). Codes are compared as unsigned integers of the format's width, values as bit patterns.
- Raise ``qref.harness.Unsupported`` (or NotImplementedError) for a case the implementation does not claim: the
  task is "unsupported", with your message. Any other exception is a crash.

Shortcut for element encoders: a function of two parameters ``fn(x, format_name) -> codes`` is called on the
``encode`` cases only.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..conformance.case import Case, plain
from ..errors import QrefError, unknown_name
from ..formats import get_format
from ..formats.policy import CastPolicy
from ..profiles import Profile, register_profile
from .model import PROFILE_FAMILY, Target, Unsupported
from .runner import RunResults, TargetInfo, judge, run_target, select_tasks

#: family -> operations a user function is asked for
OPERATIONS = {
    "elements": ("encode", "decode", "quantize"),
    "uniform": ("uniform_quantize", "uniform_dequantize"),
    "block": ("block_quantize", "block_dequantize"),
    "lookup": ("lookup_quantize", "lookup_dequantize"),
    "recipes": ("block_matmul", "qdq_matmul", "scaled_qdq"),
}


def load_callable(spec: str) -> Callable[..., Any]:
    """``"package.module:function"`` or ``"path/to/file.py:function"`` -> the function."""
    if ":" not in spec:
        raise QrefError(f"--callable {spec!r}: give MODULE:FUNCTION or path/to/file.py:FUNCTION")
    where, _, name = spec.rpartition(":")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise QrefError(f"--callable {spec!r}: no file {path}")
        mod_name = f"qref_user_{abs(hash(str(path.resolve())))}"
        loader_spec = importlib.util.spec_from_file_location(mod_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise QrefError(f"--callable {spec!r}: cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[mod_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # the user's module: any failure is its own, said in one line
            sys.modules.pop(mod_name, None)
            raise QrefError(f"--callable {spec!r}: importing {path} failed: {_failure(exc)}") from None
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise QrefError(f"--callable {spec!r}: cannot import {where} ({exc})") from None
        except (Exception, SystemExit) as exc:
            raise QrefError(f"--callable {spec!r}: importing {where} failed: {_failure(exc)}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise QrefError(f"--callable {spec!r}: {where} has no function {name!r}")
    return fn


def _failure(exc: BaseException) -> str:
    """One line for an exception raised by the user's code, with the file and line where it was raised."""
    import traceback

    tb = traceback.extract_tb(exc.__traceback__)
    at = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    if isinstance(exc, SyntaxError):
        at = f" (at {exc.filename}:{exc.lineno})"
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}){at}"
    return f"{type(exc).__name__}: {exc}{at}"


def _as_expected(case: Case, name: str, arr: np.ndarray) -> np.ndarray:
    """Integer codes in any integer dtype -> the case's unsigned storage (two's complement masked to the format's
    width); other outputs are compared as they are (as bit patterns of their width)."""
    want = case.expected.get(name)
    if want is None or want.dtype.kind != "u" or arr.dtype.kind not in "iub":
        return arr
    fmt = case.array_formats.get(name)
    nbits = get_format(fmt).bits if fmt else 8 * want.dtype.itemsize
    if nbits >= 64:
        return arr.astype(np.int64).view(np.uint64).astype(want.dtype)
    return (arr.astype(np.int64) & ((1 << nbits) - 1)).astype(want.dtype)


def _spec_of(case: Case) -> dict[str, Any]:
    return {"id": case.id, "format": plain(case.format), "policy": plain(case.policy),
            "scheme": plain(case.scheme), "params": plain(case.params)}


def _is_shortcut(fn: Callable[..., Any]) -> bool:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):
        return False
    return len(params) == 2


def callable_target(fn: Callable[..., Any], family: str, *, name: str | None = None, profile: str | None = None,
                    source: str | None = None, origin: str | None = None) -> Target:
    """A harness Target calling ``fn`` (module docstring: the calling convention) on the cases of ``family``,
    compared with ``profile`` (a profile record name of the family; None: the spec default). ``origin``: the
    MODULE:FUNCTION or path.py:FUNCTION ``fn`` was loaded from (the reproducers import it from there)."""
    if family not in OPERATIONS:
        raise unknown_name("user backend family", family, OPERATIONS)
    shortcut = family == "elements" and _is_shortcut(fn)
    ops = ("encode",) if shortcut else OPERATIONS[family]
    label = name or f"user.{getattr(fn, '__name__', 'fn')}"

    def supports(case: Case) -> str | None:
        return None if case.operation in ops else f"{label} is not asked for {case.operation}"

    def one(case: Case) -> Any:
        inputs = {k: np.array(v, copy=True) for k, v in case.inputs.items()}
        try:
            if shortcut:
                out = {"codes": np.asarray(fn(inputs["x"], case.format["name"]))}
            else:
                out = fn(case.operation, inputs, _spec_of(case))
        except NotImplementedError as exc:
            return Unsupported(f"{label}: {exc}" if str(exc) else f"{label}: not implemented")
        except Unsupported as exc:
            return exc
        except Exception as exc:
            return exc
        except SystemExit as exc:  # sys.exit() inside the function is its failure (a crash), never the run's end
            return QrefError(f"{label} {_failure(exc)}; a backend function returns outputs or raises")
        if not isinstance(out, Mapping):
            return QrefError(f"{label} returned {type(out).__name__}; the convention is a dict name -> array")
        return {k: _as_expected(case, k, np.asarray(v)) for k, v in out.items()}

    def run(cases: Sequence[Case]) -> list[Any]:
        return [one(c) for c in cases]

    def snippet(case: Case, i: int) -> str:
        if origin is None:  # a function given in Python, not by MODULE:FUNCTION: say how to call it
            x = {k: v.reshape(-1)[i: i + 1].tolist() for k, v in case.inputs.items()}
            return (f"{label}: call with operation={case.operation!r}, element {i} of inputs "
                    f"{json.dumps({k: [repr(e) for e in v] for k, v in x.items()})} and the spec of "
                    f"`qref show {case.id}`")
        return _script(origin, case, i, shortcut)

    return Target("user", label, family, source or f"{label}(operation, inputs, spec)", profile, ops, supports, run,
                  snippet)


def _script(origin: str, case: Case, i: int, shortcut: bool) -> str:
    """A standalone script (numpy, ml_dtypes and the user's module) calling the function on element ``i`` of each
    input, given as literal bits; its last statement prints the bits of the first output element."""
    where, _, fname = origin.rpartition(":")
    lines = ["import json", "import ml_dtypes", "import numpy as np"]
    if where.endswith(".py"):
        lines += ["import importlib.util",
                  f"spec_ = importlib.util.spec_from_file_location('user_module', {str(Path(where).resolve())!r})",
                  "mod = importlib.util.module_from_spec(spec_)", "spec_.loader.exec_module(mod)"]
    else:
        lines += ["import importlib", f"mod = importlib.import_module({where!r})"]
    names = []
    for k, v in case.inputs.items():
        e = np.ascontiguousarray(v.reshape(-1)[i: i + 1])
        w = 8 * e.dtype.itemsize
        dt = f"np.{e.dtype.name}" if hasattr(np, e.dtype.name) else f"ml_dtypes.{e.dtype.name}"
        bits = int(e.view(f"u{e.dtype.itemsize}")[0])
        lines.append(f"{k} = np.array([{bits:#x}], dtype=np.uint{w}).view({dt})")
        names.append(k)
    (out,) = [getattr(case, "_output", None) or next(iter(case.expected))]
    ow = 8 * case.expected[out].dtype.itemsize
    if shortcut:
        lines.append(f"out = np.asarray(mod.{fname}(x, {case.format['name']!r}))")
    else:
        spec = json.dumps(_spec_of(case), sort_keys=True)
        lines.append(f"spec = json.loads({spec!r})")
        lines.append(f"out = np.asarray(mod.{fname}({case.operation!r}, {{{', '.join(f'{n!r}: {n}' for n in names)}}}, "
                     f"spec)[{out!r}])")
    lines.append("o = out.reshape(-1)[:1]")
    lines.append(f"print(hex(int(o.astype(np.int64)[0]) & {(1 << ow) - 1:#x} if o.dtype.kind in 'iub' else "
                 f"int(o.view(np.uint{ow})[0])))")
    return "\n".join(lines)


def policy_profile(family: str, policy: Mapping[str, Any], name: str = "user_policy") -> str:
    """Register an element profile whose cast policy is ``policy`` (e.g. {"overflow": "saturate"}) and return its
    name: the reference for ``--policy KEY=VALUE`` (element family only)."""
    if family != "elements":
        raise QrefError(f"--policy sets an element cast policy; for the {family} family choose a --profile")
    pol = CastPolicy(**dict(policy))
    register_profile(Profile(name, "element", "a policy given on the command line", repr(pol), pol,
                             sources=("qref run --policy",), status="spec"), replace=True)
    return name


def check(fn: Callable[..., Any], family: str = "elements", *, profile: str | None = None,
          policy: Mapping[str, Any] | None = None, suite: object = None, include: Sequence[str] = (),
          exclude: Sequence[str] = (), xfail_files: Sequence[str] = (), name: str | None = None,
          origin: str | None = None) -> RunResults:
    """Run ``fn`` on the suite's cases of ``family`` (in this process) and return the results (``res.ok``,
    ``qref.harness.render(res)`` for the report). ``profile``/``policy`` choose the reference (default: spec)."""
    from ..conformance.suite import Suite, load_suite
    from .xfail import load_xfails

    if profile is not None and policy is not None:
        raise QrefError("give a reference profile or a policy, not both")
    ref = policy_profile(family, policy) if policy is not None else profile
    if ref is not None:
        from ..profiles import get_profile

        get_profile(ref, PROFILE_FAMILY[family])  # unknown names raise with close matches
    tg = callable_target(fn, family, name=name, profile=ref, origin=origin)
    s = suite if isinstance(suite, Suite) else load_suite(suite)  # type: ignore[arg-type]
    cases = list(s.select(family=family))
    results = run_target(tg, select_tasks(tg, cases, include, exclude))
    xf = load_xfails(list(xfail_files))
    judge(results, xf)
    res = RunResults(suite=str(s.manifest.get("name", Path(s.root).name)), suite_cases=len(s), backends=["user"],
                     filtered=bool(include or exclude))
    res.targets.append(TargetInfo("user", tg.name, family, tg.api, tg.profile))
    res.results.extend(results)
    res.stale_xfails = [f"{e.where}: {e.target} {e.cases}" for e in xf.stale()]
    return res


__all__ = ["OPERATIONS", "callable_target", "check", "load_callable", "policy_profile"]

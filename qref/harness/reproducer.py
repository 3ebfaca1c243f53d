"""Reproducer scripts in the reports (docs/conformance.md, docs/conformance/*.md): how a finding's standalone
script is shown, and how a test reads every script back with the bits it documents.

A script uses the backend's own API, numpy and ml_dtypes only (no qref), builds its input as literal bits and
prints ``got 0x.. expected 0x..``: the backend's result and the reference's expected bits, written in by qref when
the report was made (runner.standalone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..core.parallel import cores

#: the most lines a reproducer script may have (tests/test_reproducers.py checks it)
MAX_LINES = 30

_BLOCK = re.compile(r"^```python\n(.*?)\n```\n\nPrints: `([^`\n]*)`", re.M | re.S)


@dataclass(frozen=True)
class Documented:
    """One reproducer as documented: the heading it belongs to, the script and the line it prints."""

    title: str
    script: str
    prints: str
    note: str


def block(rep: dict[str, str]) -> list[str]:
    """Markdown lines showing a reproducer: the script as a ``python`` block and the line it prints; or why
    there is none."""
    if not rep.get("command"):
        return ["No standalone reproducer (the input it needs is too large to write out): run the case with "
                f"`qref run --include '{rep.get('case', '')}' --no-xfail`.", ""]
    return ["```python", rep["command"], "```", "", f"Prints: `{rep.get('prints', '')}`", ""]


def documented(text: str) -> list[Documented]:
    """Every reproducer of a report page, with the heading (### ...) above it and the note of its section."""
    out = []
    heads = [(m.start(), m.group(1)) for m in re.finditer(r"^###+ (.*)$", text, re.M)]
    for m in _BLOCK.finditer(text):
        title = next((h for pos, h in reversed(heads) if pos < m.start()), "")
        start = next((pos for pos, _h in reversed(heads) if pos < m.start()), 0)
        note = re.search(r"^- note: (.*)$", text[start : m.start()], re.M)
        out.append(Documented(title, m.group(1), m.group(2), note.group(1) if note else ""))
    return out


#: the longest line written to a generated page (docs/conformance*.md; tests/test_reproducers.py checks it)
MAX_LINE = 300
#: a script line longer than this is broken after the commas between brackets
_BREAK = 110
_MLIR = re.compile(r"""(['"])(module \{.*?\})\1""", re.S)
_MLIR_BREAK = re.compile(r"\s+(?=%[\w.#]+(?::\d+)? = |func\.func |return |\^bb|linalg\.yield |util\.|\}(?:\s|$))")


def _mlir_lines(m: re.Match[str]) -> str:
    """An MLIR module written on one line as a triple-quoted string with one operation a line (MLIR is
    insensitive to the whitespace between tokens)."""
    body = _MLIR_BREAK.sub("\n  ", m.group(2))
    return '"""\n' + body + '\n"""'


def _split_long(line: str) -> list[str]:
    """A Python line over ``_BREAK`` characters broken after the commas inside brackets (outside strings)."""
    import io
    import tokenize

    if len(line) <= _BREAK:
        return [line]
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(line + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [line]
    indent = len(line) - len(line.lstrip())
    cuts, depth, start = [], 0, 0
    for t in toks:
        if t.type == tokenize.OP and t.string in "([{":
            depth += 1
        elif t.type == tokenize.OP and t.string in ")]}":
            depth -= 1
        elif t.type == tokenize.OP and t.string == "," and depth > 0 and t.end[1] - start > _BREAK - 10:
            cuts.append(t.end[1])
            start = t.end[1]
    if not cuts:
        return [line]
    out, prev = [], 0
    for c in cuts:
        out.append(line[prev:c].rstrip() if not out else " " * (indent + 4) + line[prev:c].strip())
        prev = c
    out.append(" " * (indent + 4) + line[prev:].strip())
    return out


_LONG_STR = re.compile(r"(?<![\w'\"])'([^'\\\n]{" + str(_BREAK) + r",})'")


def _split_strings(line: str) -> str:
    """Long plain string literals inside brackets written as adjacent literals, one piece a line (Python joins
    them: the program is the same)."""
    def piece(m: re.Match[str]) -> str:
        if line.count("(", 0, m.start()) <= line.count(")", 0, m.start()):
            return m.group(0)
        text, parts = m.group(1), []
        while len(text) > 90:
            k = max(text.rfind(", ", 0, 90) + 2, text.rfind(" ", 0, 90) + 1)
            k = k if k > 20 else 90
            parts.append(text[:k])
            text = text[k:]
        parts.append(text)
        return ("\n" + " " * 8).join(repr(p) if "'" not in p else f"'{p}'" for p in parts)

    return _LONG_STR.sub(piece, line)


def layout(script: str) -> str:
    """A reproducer laid out for reading: inline MLIR modules one operation a line, long lines broken after
    commas between brackets. The program is the same (tests/test_reproducers.py runs what the page shows)."""
    if not script:
        return script
    script = _HEX.sub(_hex_lines, _MLIR.sub(_mlir_lines, script))
    out: list[str] = []
    in_str = False
    for ln in script.splitlines():
        if ln.count('"""') % 2:
            in_str = not in_str
            out.append(ln)
            continue
        if in_str:
            out.append(ln)
            continue
        for part in _split_long(ln):
            out.extend(_split_strings(part).split("\n"))
    return "\n".join(out)


def code_lines(script: str) -> int:
    """The statements of a script (logical lines: an MLIR module or a long literal written on several lines
    counts once)."""
    import io
    import tokenize

    try:
        return sum(t.type == tokenize.NEWLINE for t in tokenize.generate_tokens(io.StringIO(script + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return len(script.splitlines())


_HEX = re.compile(r"bytes\.fromhex\('([0-9a-f]{" + str(_BREAK) + r",})'\)")


def _hex_lines(m: re.Match[str]) -> str:
    h = m.group(1)
    parts = [h[i : i + 96] for i in range(0, len(h), 96)]
    return "bytes.fromhex(\n    " + "\n    ".join(f"'{p}'" for p in parts) + ")"


_RUN = "import sys; sys.modules['qref'] = None; exec(compile(open(sys.argv[1]).read(), sys.argv[1], 'exec'))"

#: the modules a backend's reproducers import (comma-separated), preloaded once by the process whose forks run them
#: (``run_scripts``); torch.compile's scripts also load dynamo and inductor, which torch imports lazily
PRELOAD = {"ml_dtypes": "ml_dtypes", "jax": "jax", "qwix": "qwix", "aqt": "aqt.jax.v2.aqt_dot_general",
           "mlx": "mlx.core", "iree": "iree.compiler", "mlir": "torch_mlir", "stablehlo": "torch_mlir",
           "onnxruntime": "onnxruntime", "onnx_reference": "onnx.reference", "bitsandbytes": "bitsandbytes",
           "torchao": "torchao", "litert": "ai_edge_litert.interpreter", "openvino": "openvino", "keras": "keras",
           "torch": "torch", "torch_compile": "torch,torch._dynamo,torch._inductor.compile_fx"}

_ENV_LINE = re.compile(r"""^(?:import os; )?os\.environ\[(['"])([A-Z_][A-Z0-9_]*)\1\] = (['"])([^'"\\]*)\3$""")


def env_prologue(script: str) -> tuple[tuple[str, str], ...] | None:
    """The environment variables ``script`` sets before its first import (other than ``os``), as (name, value)
    pairs in order; None when it touches ``os.environ`` in any other way (or after an import), so that it must
    run in a fresh interpreter."""
    env, imported = [], False
    for ln in script.splitlines():
        t = ln.strip()
        if "os.environ" in t:
            m = _ENV_LINE.match(t)
            if m is None or imported:
                return None
            env.append((m.group(2), m.group(4)))
        elif re.match(r"(import|from)\s", t) and t != "import os":
            imported = True
    return tuple(env)


def run_scripts(scripts: list[str], modules: list[str | None] | None = None, timeout: float = 600.0,
                workers: int | None = None) -> list[tuple[int, str, str]]:
    """(exit status, stdout, stderr) of each script run as a user would: its own process, its own empty
    directory, the environment without PYTHONPATH, ``sys.modules['qref'] = None`` so that ``import qref`` fails.
    A script whose module (``modules[k]``, e.g. ``PRELOAD[backend]``) is given and whose ``os.environ`` use is a
    plain prologue (``env_prologue``) runs in a fork of one process that imported numpy and the module under
    that environment (qref/harness/_forkrun.py): the same program without a second import of the backend; any
    other runs in a fresh interpreter. workers (default: the cores this process may use, at least 2): how many
    groups or fresh scripts run at the same time, each group with up to two forks at once (a group waiting for
    its import or a long script leaves the cores to the others)."""
    import json
    import os
    import subprocess
    import sys
    import tempfile
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    workers = max(2, cores() if workers is None else workers)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out: list[tuple[int, str, str]] = [(0, "", "")] * len(scripts)
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[int]] = {}
    fresh = []
    for k, script in enumerate(scripts):
        if not script:
            continue
        mod = modules[k] if modules is not None else None
        env = env_prologue(script) if mod else None
        if mod and env is not None:
            groups.setdefault((mod, env), []).append(k)
        else:
            fresh.append(k)
    forkrun = str(Path(__file__).with_name("_forkrun.py"))
    per_server = 2  # forks of one preloading process at a time (with `workers` groups: at most 2 x workers)

    def one(k: int) -> None:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "repro.py"
            p.write_text(scripts[k] + "\n", encoding="utf-8")
            try:
                r = subprocess.run([sys.executable, "-c", _RUN, str(p)], capture_output=True, text=True, cwd=d,
                                   env=base, timeout=timeout)
                out[k] = (r.returncode, r.stdout, r.stderr)
            except subprocess.TimeoutExpired:
                out[k] = (-9, "", f"no result after {timeout:.0f} s")

    def server(key: tuple[str, tuple[tuple[str, str], ...]], ks: list[int]) -> None:
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for k in ks:
                (Path(d) / str(k)).mkdir()
                p = Path(d) / str(k) / "repro.py"
                p.write_text(scripts[k] + "\n", encoding="utf-8")
                paths.append(str(p))
            res = Path(d) / "results.json"
            r = subprocess.run([sys.executable, forkrun, key[0], str(per_server), str(timeout), str(res), *paths],
                               capture_output=True, text=True, cwd=d, env={**base, **dict(key[1])})
            if r.returncode != 0 or not res.exists():  # the preload itself failed: every script says why
                err = r.stderr.strip() or f"exit status {r.returncode}"
                for k in ks:
                    out[k] = (r.returncode or 1, "", f"the process importing {key[0]} failed: {err}")
                return
            for k, (rc, so, se) in zip(ks, json.loads(res.read_text(encoding="utf-8"))):
                out[k] = (rc, so, se)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        # the largest groups first, then the single scripts, so that the pool's last minutes are not one group
        jobs = [pool.submit(server, key, ks) for key, ks in sorted(groups.items(), key=lambda g: -len(g[1]))]
        jobs += [pool.submit(one, k) for k in fresh]
        for j in jobs:
            j.result()
    return out


def capture(scripts: list[str], modules: list[str | None] | None = None, timeout: float = 600.0,
            workers: int | None = None) -> list[str]:
    """The "Prints:" line of each script (run by ``run_scripts``): the last line it printed, or ``error: <last
    line of stderr>`` when it failed, "" for an empty script. The pages show what the locked backend printed when
    they were generated, never a line written by hand."""
    res = []
    for script, (rc, so, se) in zip(scripts, run_scripts(scripts, modules, timeout, workers)):
        lines = so.strip().splitlines()
        if not script:
            res.append("")
        elif rc == 0 and lines:
            res.append(lines[-1].strip().replace("`", "'"))
        else:
            err = [ln for ln in se.strip().splitlines() if ln.strip()]
            res.append("error: " + (err[-1].strip()[:200].replace("`", "'") if err else f"exit status {rc}"))
    return res


def wrap(text: str, width: int = 118) -> str:
    """Markdown with every prose line over ``MAX_LINE`` characters broken at spaces (tables, code blocks and
    headings are kept; the rendered page is the same)."""
    import textwrap

    out, code = [], False
    for ln in text.split("\n"):
        if ln.startswith("```"):
            code = not code
        if code or len(ln) <= MAX_LINE or ln.startswith(("|", "#")):
            out.append(ln)
            continue
        lead = re.match(r"^(\s*(?:[-*] |\d+\. )?)", ln).group(1)  # type: ignore[union-attr]
        out.extend(textwrap.wrap(ln, width=width, initial_indent="", subsequent_indent=" " * len(lead),
                                 break_long_words=False, break_on_hyphens=False) or [ln])
    return "\n".join(out)


def _runs(idx: list[int]) -> str:
    """Sorted distinct indices as ``np.r_`` items: maximal arithmetic runs ``start:stop:step`` (a lone index as
    itself), e.g. [0, 64, 128, 130, 131, 132] -> "0:192:64, 130:133"."""
    out, k = [], 0
    while k < len(idx):
        if k + 2 < len(idx) and idx[k + 1] - idx[k] == idx[k + 2] - idx[k + 1]:
            step = idx[k + 1] - idx[k]
            e = k + 2
            while e + 1 < len(idx) and idx[e + 1] - idx[e] == step:
                e += 1
            out.append(f"{idx[k]}:{idx[e] + 1}" + (f":{step}" if step != 1 else ""))
            k = e + 1
        else:
            out.append(str(idx[k]))
            k += 1
    return ", ".join(out)


def sparse_input(name: str, a: Any, literal: Any) -> list[str]:
    """Statements binding ``name`` to ``a`` bit for bit: ``name = <literal(a)>`` (``literal``: the adapter's
    array writer), or, for an array whose bits are mostly 0 (a reduced reproducer input), zeros of its shape and
    dtype with the other elements set through ``name.flat[np.r_[runs]] = <literal(values)>``."""
    import numpy as np

    a = np.ascontiguousarray(a)
    flat = a.reshape(-1)
    raw = flat.view(f"u{flat.dtype.itemsize}") if flat.dtype.itemsize in (1, 2, 4, 8) else None
    nz = np.flatnonzero(raw) if raw is not None else np.arange(flat.size)
    if flat.size < 64 or nz.size * 4 > flat.size:
        return [f"{name} = {literal(a)}"]
    full = literal(flat[:1])  # the dtype expression of the literal: "np.frombuffer(...).view(DT)" or "...(..., DT)"
    dt = full.rsplit(".view(", 1)[1][:-1] if ".view(" in full else full.rsplit(", ", 1)[1].rstrip(")")
    shape = tuple(int(n) for n in a.shape)
    stmts = [f"{name} = np.zeros({shape}, {dt})"]
    if nz.size:
        stmts.append(f"{name}.flat[np.r_[{_runs([int(i) for i in nz])}]] = {literal(flat[nz])}")
    return stmts


__all__ = ["MAX_LINE", "MAX_LINES", "PRELOAD", "Documented", "block", "capture", "code_lines", "documented",
           "env_prologue", "layout", "run_scripts", "sparse_input", "wrap"]

"""``qref show CASE``: print one conformance case readably: policy, inputs and expected outputs as hex and
values (docs/vectors.md §7)."""

from __future__ import annotations

import argparse
import fnmatch
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..conformance.text import float_text, hex_words
from ._options import command, suite_option


def _values(name: str, v: np.ndarray, fmt: str | None) -> list[str]:
    """Value text per element: floats exactly (repr of the float64 value), codes decoded through their format."""
    flat = v.reshape(-1)
    if fmt is not None:
        from ..core.decode import decode
        from ..formats import get_format

        f = get_format(fmt)
        if f.bits <= 32:
            vals = decode(flat, f, dtype=np.float64)
            return [str(int(x)) if getattr(f, "kind", "") == "int" else float_text(float(x)) for x in vals]
    if flat.dtype.kind in "fV":
        with np.errstate(invalid="ignore"):  # a signaling NaN raises FE_INVALID when widened; its hex shows it
            wide = flat.astype(np.float64)
        return [float_text(float(x)) for x in wide]
    if flat.dtype == np.bool_:
        return ["true" if b else "false" for b in flat]
    return [str(int(x)) for x in flat]


def _policy_text(p: Mapping[str, Any] | None) -> str:
    return " ".join(f"{k}={v}" for k, v in p.items() if v is not None) if p else "-"


def format_case(case: Any, limit: int | None = 32) -> str:
    """The text `qref show` prints for a Case."""
    lines = [f"case        {case.id}", f"operation   {case.operation}   (family {case.family})"]
    if case.format is not None:
        f = case.format
        if f["kind"] == "float":
            detail = (f"E{f['exponent_bits']} M{f['mantissa_bits']} bias {f['bias']}, nan {f['nan']}, inf {f['inf']}"
                      + ("" if f["signed"] else ", unsigned") + ("" if f["subnormals"] else ", no subnormals")
                      + ("" if f["zero"] else ", no zero"))
        else:
            detail = f"{'signed' if f['signed'] else 'unsigned'} {f['bits']}-bit, range [{f['min']}, {f['max']}]"
        lines.append(f"format      {f['name']} ({detail})")
    if case.policy is not None:
        lines.append(f"policy      {_policy_text(case.policy)}")
    if case.scheme is not None:
        lines.append(f"scheme      {_policy_text(case.scheme)}")
    if case.params:
        lines.append(f"params      {_policy_text(case.params)}")
    lines.append(f"profile     {case.profile or '-'}   holds for profiles: {', '.join(case.profiles) or '-'}")
    if case.equivalent:
        lines.append("also holds  " + "; ".join(_policy_text(e) for e in case.equivalent))
    lines.append(f"tags        {', '.join(case.tags) or '-'}")
    lines.append(f"spec        {', '.join(case.spec) or '-'}")
    if case.description:
        lines.append(f"about       {case.description}")
    arrays = {**case.inputs, **case.expected}
    kinds = {**{k: "input" for k in case.inputs}, **{k: "expected" for k in case.expected}}
    for k, v in arrays.items():
        fmt = case.array_formats.get(k)
        lines.append(f"{kinds[k]:<11} {k}: {v.dtype.name}{list(v.shape)}" + (f" codes of {fmt}" if fmt else ""))
    sizes = {v.size for v in arrays.values()}
    groups = [list(arrays)] if len(sizes) == 1 else [[k] for k in arrays]
    for names in groups:
        n = arrays[names[0]].size
        shown = n if limit is None else min(n, limit)
        cols: list[tuple[str, list[str]]] = [("#", [str(i) for i in range(shown)])]
        for k in names:
            v = arrays[k].reshape(-1)[:shown]
            cols.append((f"{k} hex", hex_words(v)))
            cols.append((k, _values(k, v, case.array_formats.get(k))))
        unspec = [case.unspecified[k].reshape(-1)[:shown] for k in names if k in case.unspecified]
        if unspec:
            mask = np.logical_or.reduce(unspec)
            cols.append(("unspecified", ["*" if m else "" for m in mask]))
        widths = [max(len(h), *(len(x) for x in c)) if c else len(h) for h, c in cols]
        lines.append("")
        lines.append("  ".join(h.rjust(w) for (h, _), w in zip(cols, widths)).rstrip())
        for i in range(shown):
            lines.append("  ".join(c[i].rjust(w) for (_, c), w in zip(cols, widths)).rstrip())
        if shown < n:
            lines.append(f"... {n - shown} more rows (--all prints every row, --limit N the first N)")
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    from ..conformance.suite import load_suite
    from ..errors import QrefError

    if args.limit < 0:
        raise QrefError(f"--limit {args.limit}: give a number of rows >= 0 (or --all)")
    suite = load_suite(args.suite)
    if any(ch in args.case for ch in "*?["):
        ids = [i for i in suite.ids if fnmatch.fnmatchcase(i, args.case)]
        for i in ids:
            print(i)
        if not ids:
            print(f"no case id matches {args.case!r} in {suite.root}")
            return 1
        return 0
    case = suite[args.case]
    print(format_case(case, None if args.all else args.limit))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "show", _run,
                "print a conformance case: policy, inputs and expected outputs as hex and values", """
        Print one case of a conformance suite readably (inputs and expected outputs side by side, as hex bit
        patterns and exact values; '*' marks unspecified results). A glob pattern lists matching ids instead, e.g.
        qref show 'elements/float8_e4m3fn/f32/*/ties'.""")
    p.add_argument("case", metavar="CASE", help="case id or glob pattern")
    suite_option(p, "suite directory (default: $QREF_SUITE, else the checkout's conformance/v1)", "DIR")
    p.add_argument("--limit", type=int, default=32, metavar="N", help="rows to print (default 32)")
    p.add_argument("--all", action="store_true", help="print every row")


__all__ = ["format_case", "register"]

"""``qref table FMT``: every code of a format with hex, value and class (spec: elements.md §1)."""

from __future__ import annotations

import argparse
from fractions import Fraction

from ..errors import QrefError
from ..formats import FloatFormat, Format, get_format


def format_value(v: Fraction | float) -> str:
    """Shortest exact decimal-or-dyadic text of a value: repr(float) when float64 holds it, else m*2^e."""
    if isinstance(v, float):
        return repr(v)
    f = float(v) if abs(v.numerator).bit_length() < 1000 and v.denominator.bit_length() < 1070 else None
    if f is not None and Fraction(f) == v:
        return repr(f)
    num, den = v.numerator, v.denominator
    e = -(den.bit_length() - 1) if den > 1 else 0
    while num % 2 == 0 and num:
        num //= 2
        e += 1
    return f"{num}*2^{e}"


def table_rows(fmt: Format, limit: int | None = None) -> list[tuple[str, str, str, str]]:
    """(code, hex, value, class) rows for every code of ``fmt`` (formats of at most 16 bits)."""
    if fmt.bits > 16:
        raise QrefError(f"{fmt.name} has 2^{fmt.bits} codes; `qref table` prints formats of at most 16 bits")
    width = (fmt.bits + 3) // 4
    rows = []
    for c in range(1 << fmt.bits if limit is None else min(limit, 1 << fmt.bits)):
        cls = fmt.classify(c)
        negative_zero = cls == "zero" and isinstance(fmt, FloatFormat) and bool(c & fmt.sign_mask)
        value = "-0.0" if negative_zero else format_value(fmt.exact_value(c))
        rows.append((str(c), f"0x{c:0{width}X}", value, cls))
    return rows


def _run(args: argparse.Namespace) -> int:
    fmt = get_format(args.format)
    rows = table_rows(fmt)
    if isinstance(fmt, FloatFormat):
        print(f"# {fmt!r}")
        print(f"# max {format_value(fmt.max_value)}  min normal {format_value(fmt.min_normal)}  "
              f"min positive {format_value(fmt.min_value)}  default overflow {fmt.default_overflow}")
    else:
        print(f"# {fmt.name}: range [{fmt.lo}, {fmt.hi}]")
    if args.csv:
        print("code,hex,value,class")
        for r in rows:
            print(",".join(r))
    else:
        print(f"{'code':>6} {'hex':>7} {'value':>26}  class")
        for code, hx, val, cls in rows:
            print(f"{code:>6} {hx:>7} {val:>26}  {cls}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("table", help="print every code of a format with hex, value and class",
                       description="Print every code of FORMAT (at most 16 bits) with its hex, exact value and "
                       "class (zero, subnormal, normal, inf, nan).")
    p.add_argument("format", help="format name, e.g. float8_e4m3fn, f8E5M2, binary8p3se, float4_e1m2fn")
    p.add_argument("--csv", action="store_true", help="comma-separated output")
    p.set_defaults(func=_run)

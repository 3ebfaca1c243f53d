"""``qref probe-matmul --callable MODULE:FUNCTION``: fit an accumulation record to a matmul (mma.md §11)."""

from __future__ import annotations

import argparse
import importlib

from ._options import command


def _load(spec: str) -> object:
    from ..errors import QrefError

    mod, sep, name = spec.partition(":")
    if not sep or not mod or not name:
        raise QrefError(f"--callable {spec!r}: write MODULE:FUNCTION, e.g. mypkg.kernels:matmul (a function "
                        "fn(A, B) -> D on numpy arrays)")
    try:
        fn = importlib.import_module(mod)
        for part in name.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError) as exc:
        raise QrefError(f"--callable {spec!r}: cannot load it ({exc}); check the module is importable "
                        "(PYTHONPATH) and the function name") from exc
    if not callable(fn):
        raise QrefError(f"--callable {spec!r} is not callable")
    return fn


def _run(args: argparse.Namespace) -> int:
    from ..mma.probe import probe_matmul

    fn = _load(args.callable)
    res = probe_matmul(fn, args.a_format, args.b_format, args.d_format, runs=args.runs,  # type: ignore[arg-type]
                       blocks=not args.no_blocks, block_k=args.block_k)
    print(f"probe-matmul {args.callable} ({args.a_format} x {args.b_format or args.a_format} -> {args.d_format})")
    print(res.report())
    return 0 if res.record is not None else 1


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "probe-matmul", _run,
                "fit an accumulation record (order, lanes, FMA, width, blocks) to a matmul", """
        Call fn(A, B) -> D (numpy arrays) on crafted operands that expose the summation order, the accumulator width
        and rounding, FMA, special values and subnormal flushing; print the fitted qref.mma.KernelAccumulation
        record with the evidence, or say that none fits (exit status 1). Spec: docs/spec/mma.md §11.""")
    p.add_argument("--callable", required=True, metavar="MODULE:FUNCTION", help="the matmul to probe")
    p.add_argument("--a-format", default="float32", help="operand A's format (numpy storage dtype; default float32)")
    p.add_argument("--b-format", default=None, help="operand B's format (default: A's)")
    p.add_argument("--d-format", default="float32", help="the output's format (default float32)")
    p.add_argument("--runs", type=int, default=2, help="calls per probe to detect nondeterminism (default 2)")
    p.add_argument("--no-blocks", action="store_true", help="skip the K-block stage (a K = --block-k probe)")
    p.add_argument("--block-k", type=int, default=2048, help="K of the block stage (default 2048)")


__all__ = ["register"]

"""``qref compare FILE.npy --schemes ...``: quantization error of one tensor under several schemes, one table row
per scheme (guide: docs/analysis.md §5-6); ``--plot OUT.png`` also draws the comparison (needs matplotlib)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..errors import QrefError
from ._options import command, quiet_option

DEFAULT_SCHEMES = ("float8_e4m3fn:axis=0", "float8_e5m2:axis=0", "mxfp8_e4m3", "mxfp6_e2m3", "mxfp4", "nvfp4",
                   "nf4:block_size=64", "int8:axis=0", "int4:block_size=128")

SYNTAX = """\
scheme syntax: NAME[:KEY=VALUE[,KEY=VALUE...]]  (docs/analysis.md §5)
  NAME   a scheme name (mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, mxint8, nvfp4, mlx_affine, nf4,
         af4, fp4_bnb, dynamic8) or a format (float8_e4m3fn, float8_e5m2, int8, int4, 'int8<-127:127>', ...)
  VALUE  int, float, true/false, none, or a word; label=TEXT names the row
  float format             plain cast (options: rounding=, overflow=, profile=)
  float format + axis= / scale=absmax
                           absmax-scaled: s = fl32(amax / max) per tensor or per index of axis, ONNX
                           QuantizeLinear to the format (saturate=1); scale=<number> fixes s
  float format + block_size=  block scaling (E8M0 scales; scale_format= to change)
  integer format           qref.calibrate(x, fmt, method=absmax|minmax|percentile, axis=, block_size=
                           [along axis, default -1], formula=).scheme(profile= [default stablehlo]);
                           scale=<number>[,zero_point=N]: that fixed scheme, no calibration
  scheme name              qref.scheme(NAME, **options); axis= is where the blocks run
examples: float8_e4m3fn  float8_e4m3fn:axis=0  int8:axis=0  int4:block_size=128,method=minmax
          mxfp4:scale_rule=rceil  nvfp4  nf4:block_size=64,profile=bitsandbytes  mlx_affine:bits=4,group_size=64
"""


def load_array(path: str, key: str | None = None) -> np.ndarray:
    """A tensor from .npy (or one array of an .npz: ``key``, or the only one)."""
    p = Path(path)
    if not p.is_file():
        raise QrefError(f"{path}: no such file (give a .npy file, e.g. np.save('w.npy', weights))")
    try:
        data = np.load(p, allow_pickle=False)
    except ValueError as exc:
        raise QrefError(f"{path}: not a numpy .npy/.npz file without pickled objects ({exc})") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        with data:
            names = list(data.files)
            if key is None:
                if len(names) != 1:
                    raise QrefError(f"{path} holds {len(names)} arrays ({', '.join(names)}); choose one with --key")
                key = names[0]
            if key not in names:
                raise QrefError(f"{path} has no array {key!r}; it has {', '.join(names)}")
            arr = data[key]
    else:
        if key is not None:
            raise QrefError("--key selects an array of an .npz file; this is a .npy file")
        arr = data
    if arr.dtype.kind not in "fiu" and arr.dtype.name != "bfloat16":
        raise QrefError(f"{path}: expected a real numeric array, got dtype {arr.dtype}")
    if arr.size == 0:
        raise QrefError(f"{path}: the array is empty")
    return arr


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
MMAP_THRESHOLD = 16 << 20  # bytes: arrays above it are mapped, unmapped when freed (4 MiB: 6.4x, 2x the system time)


def bound_heap() -> bool:
    """Fix glibc's mmap threshold at MMAP_THRESHOLD for this process (performance.md §6.2): by default it rises
    to the size of each mapped block freed (up to 32 MiB), after which freed arrays up to that size stay in the
    heap, fragmented, and count in the peak (``qref compare`` of 4096 x 4096 over five schemes: 7.7x the input
    with the dynamic threshold, 6.9x with this one, measured in one round). True where it was set (glibc);
    elsewhere nothing changes."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt)
        return False


def _run(args: argparse.Namespace) -> int:
    from .. import analysis

    bound_heap()
    arr = load_array(args.file, args.key)
    schemes = args.schemes or list(DEFAULT_SCHEMES)
    recipes = [analysis.parse_scheme(s) for s in schemes]  # parse all first: report syntax errors up front
    channel_axis = None if args.channel_axis in ("none", "None") else int(args.channel_axis)
    block_size = None if args.block_size in ("none", "None") else int(args.block_size)
    progress = not args.quiet and sys.stderr.isatty()  # one bar per scheme on a terminal
    table = analysis.compare(arr, recipes, channel_axis=channel_axis, block_size=block_size,
                             block_axis=args.block_axis, progress=progress, threads=args.threads,
                             keep=bool(args.plot))  # the plot reads each scheme's y; the table only its row
    if args.sort:
        table = table.sorted(args.sort)  # type: ignore[assignment]
    shown = table.select(*args.columns.split(",")) if args.columns else table
    out = {"text": shown.to_text, "markdown": shown.to_markdown, "csv": shown.to_csv}[args.output_format]()
    print(f"# {args.file}: shape {tuple(arr.shape)}, dtype {arr.dtype}, {arr.size} elements")
    print(out)
    if args.plot:
        from ..analysis import plot

        fig = plot.compare_figure(arr, table)  # type: ignore[arg-type]
        fig.savefig(args.plot, dpi=args.dpi)
        print(f"# wrote {args.plot}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "compare", _run,
                "quantization error of a tensor (.npy) under several schemes: one table row per scheme",
                "Quantize FILE (a .npy tensor) with each scheme and print MSE, SQNR, max errors, bias, cosine, KL, "
                "worst channel / block SQNR and saturation / clipping counts (docs/analysis.md).",
                epilog=SYNTAX, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE.npy", help="the tensor (.npy, or .npz with --key)")
    p.add_argument("--schemes", nargs="+", metavar="SPEC",
                   help=f"schemes in the compact syntax below (default: {' '.join(DEFAULT_SCHEMES)})")
    p.add_argument("--key", help="array name inside an .npz file")
    p.add_argument("--plot", metavar="OUT.png", help="also write a PNG (SQNR bars + error vs |x|; needs matplotlib)")
    p.add_argument("--dpi", type=int, default=110, help="PNG resolution (default 110)")
    p.add_argument("--channel-axis", default="0", help="axis of the per-channel breakdown (default 0; 'none')")
    p.add_argument("--block-size", default="32", help="block of the per-block breakdown (default 32; 'none')")
    p.add_argument("--block-axis", type=int, default=-1, help="axis of the per-block breakdown (default -1)")
    p.add_argument("--sort", help="sort rows by this column, descending (e.g. sqnr_db)")
    p.add_argument("--columns", help="comma-separated columns to print (default: all)")
    quiet_option(p, "no progress bars (shown on a terminal)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads of the kernels (default: $QREF_NUM_THREADS, else every core; the table never "
                   "depends on it)")
    p.add_argument("--format", dest="output_format", choices=("text", "markdown", "csv"), default="text",
                   help="table format (default text)")


__all__ = ["DEFAULT_SCHEMES", "SYNTAX", "bound_heap", "load_array", "register"]

"""Fit an accumulation record to a black-box matmul from crafted operands (spec: mma.md §11).

``probe_matmul(fn, a_format, b_format, d_format)`` calls ``fn(A, B) -> D`` on operands that expose the
summation order (cancelling +big / -big placed at chosen k), the accumulator's width and rounding, FMA, special
values and subnormal flushing; every candidate record (mma.md §10 grid, or matrix-unit records) is run on the
same operands and kept when its bits equal fn's (NaN as a class); the kept ones are then checked on seeded random
and adversarial operands (the validation set). Evidence is reported from fn's outputs alone.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ..errors import QrefError
from .accumulate import ACCUMULATORS, KernelAccumulation
from .algorithms import _Algorithm
from .bits import OPERAND_FORMATS, operand_format, storage_dtype

MatmulFn = Callable[[np.ndarray, np.ndarray], Any]
_BLOCKS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 320, 384, 512, 768, 1024)
_LANES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


@dataclass(frozen=True)
class ProbeResult:
    """What ``probe_matmul`` found (mma.md §11): ``record`` (the first fitting, validated candidate, or None),
    ``equivalent`` (every candidate that fits the probes and the validation set), ``evidence`` (lines read from
    fn's outputs), ``nondeterministic`` (probe names whose outputs changed between runs)."""

    record: _Algorithm | None
    equivalent: tuple[_Algorithm, ...]
    evidence: tuple[str, ...]
    nondeterministic: tuple[str, ...] = ()
    rejected_late: tuple[_Algorithm, ...] = field(default=(), repr=False)

    def report(self) -> str:
        """The printed report: the fitted record (or that none fits) and the evidence."""
        lines = ["evidence:"] + [f"  {e}" for e in self.evidence]
        if self.record is None:
            lines.append("fit: no record fits" + (" (outputs change from run to run: "
                                                 + ", ".join(self.nondeterministic) + ")"
                                                 if self.nondeterministic else ""))
        else:
            lines.append(f"fit: {_describe(self.record)}")
            if len(self.equivalent) > 1:
                lines.append(f"  ({len(self.equivalent)} records give identical bits on the probes and the "
                             "validation set; the simplest is shown)")
        return "\n".join(lines)


def _describe(r: _Algorithm) -> str:
    if isinstance(r, KernelAccumulation):
        d = {f.name: getattr(r, f.name) for f in fields(r) if f.name != "nan_output"}
        return f"KernelAccumulation({', '.join(f'{k}={v!r}' for k, v in d.items())})  # {r.name()}"
    return repr(r)


# -------------------------------------------------------------------------------------------------------------
# operands
# -------------------------------------------------------------------------------------------------------------
def _range(fmt: str) -> tuple[float, float]:
    """(big, small): the largest power of two <= 2^40 and the smallest normal power of two >= 2^-40 of fmt."""
    f = operand_format(fmt)
    emax = int(np.floor(np.log2(float(f.max_value))))
    emin = 1 - f.bias if f.zero else -f.bias
    return 2.0 ** min(emax, 40), 2.0 ** max(emin, -40)


def _cast(x: np.ndarray, fmt: str) -> np.ndarray:
    dt = storage_dtype(fmt)
    out = np.asarray(x, np.float64).astype(dt)
    if not np.array_equal(out.astype(np.float64), np.asarray(x, np.float64), equal_nan=True):
        raise AssertionError(f"probe operand not exact in {fmt}")  # the probes pick representable values
    return out


def _cancel(K: int, pairs: Sequence[tuple[int, int]], fa: str, fb: str, n: int = 16
            ) -> tuple[np.ndarray, np.ndarray]:
    """Row r: +big at k = i, -big at k = j, small elsewhere, for (i, j) = pairs[r]; B all ones (K, n): every
    column of row r is the same cancellation (mma.md §11 2)."""
    big, small = _range(fa)
    A = np.full((len(pairs), K), small)
    idx = np.arange(len(pairs))
    A[idx, [p[0] for p in pairs]] = big
    A[idx, [p[1] for p in pairs]] = -big
    return _cast(A, fa), _cast(np.ones((K, n)), fb)


def _pairs(K: int, step: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(0, K, step) for j in range(K) if j != i]


def _probes(fa: str, fb: str) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The crafted (name, A, B) pairs of mma.md §11 (2-5) for operand formats fa, fb."""
    _, small = _range(fa)
    out: list[tuple[str, np.ndarray, np.ndarray]] = []
    for K, step in ((8, 1), (24, 1), (64, 8)):
        A, B = _cancel(K, _pairs(K, step), fa, fb)
        out.append((f"order K={K} (+big at i, -big at j, small elsewhere)", A, B))
    # width and rounding: 1 * 1 + 2^-j * 1 (+ 2^-j-1) for j = 1.., placed first and last
    f = operand_format(fa)
    js = [j for j in range(1, 60) if 2.0 ** -j >= small]
    rows = []
    for j in js:
        for extra in (0.0, 2.0 ** (-j - 1), 2.0 ** (-j - 2)):
            r = [1.0, 2.0 ** -j] + ([extra] if extra and extra >= small else [0.0]) + [0.0]
            rows.append(r)
            rows.append(r[::-1])
            rows.append([-v for v in r])
    A = np.array(rows).reshape(-1, 4)
    B = np.ones((4, 8))
    if len(rows):
            out.append(("width and rounding: 1 + 2^-j (+ 2^-j-1 / 2^-j-2)", _cast(A, fa), _cast(B, fb)))
    # FMA: c first, then a b with a b + c exact but a b not representable in a narrower accumulator
    m = f.mantissa_bits
    h = max(1, (m + 1) // 2)
    a = 1 + 2.0 ** -h
    c = -(1 + 2.0 ** -h)
    A = np.array([[c, a, 0, 0], [c, 0, a, 0], [c, 0, 0, a], [0, a, c, 0]])
    B = np.repeat(np.array([[1.0], [a], [a], [a]]), 8, axis=1)
    with contextlib.suppress(AssertionError):
        out.append(("FMA: c + a*a, a = 1 + 2^-h", _cast(A * np.array([1, 1, 1, 1]), fa), _cast(B, fb)))
    # specials and signed zeros, subnormals
    inf = float(f.max_value) * 4 if f.nan == "ieee" else None
    rows = [[-0.0, -0.0, 0, 0], [-0.0, 0.0, 0, 0], [1.0, -1.0, 0, 0]]
    if inf is not None:
        rows += [[np.inf, 1.0, 0, 0], [np.inf, -np.inf, 0, 0], [np.nan, 1.0, 0, 0], [1.0, np.inf, 0, 0]]
    sub = 2.0 ** (1 - f.bias - f.mantissa_bits) if f.zero else None
    if sub is not None and sub > 0:
        rows += [[sub, 0, 0, 0], [sub, sub, 0, 0], [small, -small / 2 if small / 2 >= sub else 0, 0, 0]]
    A = np.array(rows, dtype=np.float64)
    B = np.ones((4, 8))
    with np.errstate(invalid="ignore"):
        out.append(("specials: -0, NaN, Inf, subnormals", _cast(A, fa), _cast(B, fb)))
    # libraries send tiny GEMMs to other kernels: the short probes are tiled to >= 64 rows and 16 columns
    return [(n, _tile_rows(a, 64), np.tile(b[:, :1], (1, 16))) for n, a, b in out]


def _tile_rows(A: np.ndarray, rows: int) -> np.ndarray:
    """A repeated along its rows to at least ``rows`` rows (the evidence reads the first copy)."""
    return np.tile(A, (-(-rows // A.shape[0]), 1)) if A.shape[0] < rows else A


def _validation(fa: str, fb: str, seed: int = 1234, K: int = 200, long_k: bool = True
                ) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Seeded random and adversarial operands: normal values with a wide exponent spread, sums that cancel."""
    rng = np.random.default_rng(seed)
    big, small = _range(fa)
    lo, hi = np.log2(small), np.log2(big)

    def draw(shape: tuple[int, int], fmt: str) -> np.ndarray:
        x = rng.standard_normal(shape) * np.exp2(rng.integers(int(max(lo, -20)), int(min(hi, 20)) // 2 + 1, shape))
        x[rng.random(shape) < 0.05] = 0.0
        return np.asarray(x).astype(storage_dtype(fmt))

    A, B = draw((64, K), fa), draw((K, 64), fb)
    A2 = A.copy()
    B2 = np.asarray(np.where(rng.random((K, 64)) < 0.5, 1.0, -1.0)).astype(storage_dtype(fb))
    A2[:, K // 2:] = np.asarray(-A2[:, :K - K // 2].astype(np.float64)).astype(A.dtype)
    out = [("random", A, B), ("cancelling", A2, B2), ("random K=37", A[:, :37], B[:37])]
    if long_k:
        out.append(("random K=1000", draw((64, 1000), fa), draw((1000, 64), fb)))
        out.append(("random K=300", draw((64, 300), fa), draw((300, 64), fb)))
    return out


# -------------------------------------------------------------------------------------------------------------
# candidates
# -------------------------------------------------------------------------------------------------------------
def kernel_candidates(blocks: bool = False) -> list[KernelAccumulation]:
    """The grid of mma.md §11 (6): accumulators x lanes x reductions x fused / rounded x flush (+ pairwise);
    with ``blocks``, the same without lanes > 16 and with every block size of _BLOCKS."""
    out: list[KernelAccumulation] = []
    for acc, fl in itertools.product(ACCUMULATORS, ("keep", "flush")):
        for L, prod, red in itertools.product(_LANES, ("fused", "rounded"), ("sequential", "halving", "pairwise")):
            if (L == 1 and red != "sequential") or (red == "halving" and L & (L - 1)):
                continue
            out.append(KernelAccumulation(acc, L, prod, red, subnormals=fl))
        out.append(KernelAccumulation(acc, 1, "rounded", order="pairwise", subnormals=fl))
    return out


def unit_candidates(a_format: str, b_format: str, d_format: str) -> list[_Algorithm]:
    """Matrix-unit candidates (mma.md §11 6): the distinct arithmetic records of the unscaled qref.mma
    instructions of these formats, each with its neighbours (fractional bits +-1, chunk x2 and /2, the other
    adder width / interleave), in table order."""
    from .algorithms import ExactFusedDot, FlushedMulAdd, TruncatedFusedDot, TwoStageFusedDot
    from .isa import instructions

    base: list[_Algorithm] = []
    for ins in instructions():
        if not ins.scaled and (ins.a_format, ins.b_format, ins.d_format) == (a_format, b_format, d_format) \
                and ins.arithmetic not in base:
            base.append(ins.arithmetic)
    out: list[_Algorithm] = []
    for r in base:
        near: list[_Algorithm] = [r]
        if isinstance(r, TruncatedFusedDot):
            near += [replace(r, frac_bits=f) for f in (r.frac_bits - 1, r.frac_bits + 1) if 1 <= f <= 48]
            near += [replace(r, chunk=c) for c in (r.chunk // 2, r.chunk * 2) if 1 <= c <= 256]
        elif isinstance(r, TwoStageFusedDot):
            near += [replace(r, frac_bits=r.frac_bits - 1), replace(r, chunk=r.chunk * 2)]
            near += [replace(r, interleave=3 - r.interleave)] if r.interleave in (1, 2) else []
        elif isinstance(r, ExactFusedDot):
            near += [replace(r, chunk=c) for c in (r.chunk // 2, r.chunk * 2) if 1 <= c <= 64]
        elif isinstance(r, FlushedMulAdd):
            near += [FlushedMulAdd(6 - r.adder_width)]
        for x in near:
            if x not in out:
                out.append(x)
    return out


def _with_blocks(r: KernelAccumulation, sizes: Iterable[int]) -> list[KernelAccumulation]:
    wider = [f for f in ACCUMULATORS if ACCUMULATORS.index(f) > ACCUMULATORS.index(r.accumulator)]
    out = []
    for B in sizes:
        for bacc in [None, *wider]:
            out.append(replace(r, block=B, block_accumulator=bacc))
            out += [replace(r, block=B, block_accumulator=bacc, block_split="halve_remainder", block_half=h,
                            block_unroll=u) for h, u in (("ceil", 1), ("floor", 16), ("floor", 8), ("floor", 4))]
            out.append(replace(r, block=B, block_accumulator=bacc, block_split="halve_short"))
    return out


def _run_record(r: _Algorithm, A: np.ndarray, B: np.ndarray, fa: str, fb: str, fd: str) -> np.ndarray:
    a = A[:, None, :]
    b = np.ascontiguousarray(B.T)[None, :, :]
    c = np.zeros((A.shape[0], B.shape[1]), storage_dtype("float32" if fd == "bfloat16" else fd))
    if isinstance(r, KernelAccumulation):
        return r.dot(a, b, c, fa, fb, "float32" if fd == "bfloat16" else fd, fd)
    chunk = getattr(r, "chunk", getattr(r, "adder_width", 1))  # K padded with zeros to the unit's step
    K = A.shape[1]
    if K % min(chunk, K):
        pad = min(chunk, K) - K % min(chunk, K)
        a = np.concatenate([a, np.zeros((*a.shape[:-1], pad), a.dtype)], -1)
        b = np.concatenate([b, np.zeros((*b.shape[:-1], pad), b.dtype)], -1)
    return r.dot(a, b, c, fa, fb, fd, fd)


def _bits(x: np.ndarray) -> np.ndarray:
    """Unsigned bits with every NaN the same (NaN compared as a class, mma.md §10.2 C3)."""
    x = np.asarray(x)
    u = x.view(f"u{x.dtype.itemsize}").copy()
    u[np.isnan(x.astype(np.float64))] = 1
    return u


def _call(fn: MatmulFn, A: np.ndarray, B: np.ndarray, fd: str) -> np.ndarray:
    out = np.asarray(fn(A.copy(), B.copy()))
    want = storage_dtype(fd)
    if out.shape != (A.shape[0], B.shape[1]):
        raise QrefError(f"probe_matmul: fn returned shape {out.shape} for A {A.shape} @ B {B.shape}; it must "
                        "return the (M, N) product")
    if out.dtype != want:
        raise QrefError(f"probe_matmul: fn returned {out.dtype}, expected {want} (d_format); convert the result "
                        "in fn (e.g. torch: .float().numpy())")
    return out


def probe_matmul(fn: MatmulFn, a_format: str = "float32", b_format: str | None = None,
                 d_format: str = "float32", *, candidates: Iterable[_Algorithm] | None = None, runs: int = 2,
                 blocks: bool = True, block_k: int = 2048) -> ProbeResult:
    """Fit a record to ``fn(A (M, K), B (K, N)) -> D (M, N)`` (mma.md §11).

    a_format / b_format: the operand formats fn takes (numpy storage dtypes of qref.mma); d_format: its output.
    candidates: records to try (default the §10 grid; matrix-unit records for GPU units). runs: calls per probe
    (outputs that differ make the fit fail). blocks: also fit the K block (a K = block_k probe)."""
    b_format = b_format or a_format
    for nm, f in (("a_format", a_format), ("b_format", b_format)):
        if f not in OPERAND_FORMATS:
            raise QrefError(f"probe_matmul: {nm} {f!r} is not an operand format; use one of "
                            f"{', '.join(OPERAND_FORMATS)}")
    fa, fb, fd = a_format, b_format, d_format
    probes = _probes(fa, fb)
    outs, nondet = [], []
    for name, A, B in probes:
        first = _call(fn, A, B, fd)
        for _ in range(runs - 1):
            if not np.array_equal(_bits(first), _bits(_call(fn, A, B, fd))):
                nondet.append(name)
        outs.append(first)
    evidence = _evidence(probes, outs, fa, fd)
    if nondet:
        return ProbeResult(None, (), tuple(evidence), tuple(nondet))
    cands = list(candidates) if candidates is not None else kernel_candidates()
    order = sorted(range(len(probes)), key=lambda i: probes[i][1].size)  # cheap probes first
    for i in order:
        _, A, B = probes[i]
        want = _bits(outs[i])
        cands = [r for r in cands if _matches(r, A, B, fa, fb, fd, want)]
        if not cands:
            break
    if blocks and cands and candidates is None:
        cands = _fit_blocks(fn, cands, fa, fb, fd, block_k, evidence)
    val = _validation(fa, fb, long_k=blocks and candidates is None)
    late: list[_Algorithm] = []
    kept = []
    vouts = [_bits(_call(fn, A, B, fd)) for _, A, B in val]
    for r in cands:
        if all(_matches(r, A, B, fa, fb, fd, w) for (_, A, B), w in zip(val, vouts)):
            kept.append(r)
        else:
            late.append(r)
    return ProbeResult(kept[0] if kept else None, tuple(kept), tuple(evidence), (), tuple(late))


def _fit_blocks(fn: MatmulFn, cands: list[_Algorithm], fa: str, fb: str, fd: str, K: int, evidence: list[str]
                ) -> list[_Algorithm]:
    """The K-block stage (mma.md §11 2): +big at k = 0, -big at k = j for every j < K (one row each); where the
    count of surviving small products jumps, a block ends. Candidates: each fitted record with the blocks of
    _BLOCKS and of the jumps, fixed or with a halved remainder, summed in the accumulator or a wider format."""
    A, B = _cancel(K, [(0, j) for j in range(1, K)], fa, fb)
    got = _call(fn, A, B, fd)
    _, small = _range(fa)
    cnt = np.asarray(got[:, 0], np.float64) / small
    segs = _segments(cnt)
    evidence.append(f"blocks, K={K}, +big at k=0, -big at k=j: surviving small products by j (runs of one slope): "
                    + "; ".join(f"j={a}..{b}: {cnt[a - 1]:g}" + (f" down to {cnt[b - 1]:g}" if b > a else "")
                                for a, b in segs[:10]) + (" ..." if len(segs) > 10 else ""))
    jumps = [a for a, _ in segs[1:]]
    rows = sorted(set(range(0, K - 1, 16)) | {j - 1 for j in jumps[:8]} | {j - 2 for j in jumps[:8] if j > 1}
                  | {j for j in jumps[:8] if j < K - 1})
    sA, want = A[rows], _bits(got[rows])
    sizes = sorted(set(_BLOCKS) | {j for j in jumps[:3]})
    out: list[_Algorithm] = []
    for base in [c for c in cands if isinstance(c, KernelAccumulation)][:4]:
        if _matches(base, sA, B, fa, fb, fd, want):
            out.append(base)
        for r in _with_blocks(base, sizes):
            if _matches(r, sA, B, fa, fb, fd, want):
                out.append(r)
    return out


def _segments(cnt: np.ndarray) -> list[tuple[int, int]]:
    """Runs [a, b] of j (1-based) over which the count changes by one constant step."""
    segs: list[tuple[int, int]] = []
    a = 1
    for j in range(2, len(cnt) + 1):
        step = cnt[j - 1] - cnt[j - 2]
        first = cnt[a] - cnt[a - 1] if a < len(cnt) else step
        if (j - a >= 2 and step != first) or (j - a == 1 and abs(step) > 1):
            segs.append((a, j - 1))
            a = j
    segs.append((a, len(cnt)))
    return segs


def _matches(r: _Algorithm, A: np.ndarray, B: np.ndarray, fa: str, fb: str, fd: str, want: np.ndarray) -> bool:
    """Whether record r gives fn's bits ``want`` on (A, B); identical columns of B are computed once."""
    same = B.shape[1] > 1 and bool((B.view(f"u{B.dtype.itemsize}") == B[:, :1].view(f"u{B.dtype.itemsize}")).all())
    try:
        got = _run_record(r, A, B[:, :1] if same else B, fa, fb, fd)
    except QrefError:
        return False
    got = _bits(np.asarray(got, storage_dtype(fd)))
    return bool(np.array_equal(np.broadcast_to(got, want.shape), want))


def _survivors(D: np.ndarray, fa: str) -> str:
    """The outputs of a cancellation probe in units of the small product (how many smalls survived)."""
    _, small = _range(fa)
    v = np.asarray(D, np.float64) / small
    return " ".join(f"{x:g}" for x in v.ravel()[:24]) + (" ..." if v.size > 24 else "")


def _evidence(probes: list[tuple[str, np.ndarray, np.ndarray]], outs: list[np.ndarray], fa: str, fd: str
              ) -> list[str]:
    """Facts read from fn's outputs alone (mma.md §11 2-5)."""
    ev = []
    for (name, _A, _B), D in zip(probes, outs):
        d = np.asarray(D, np.float64)
        if name.startswith("order K=64"):
            _, small = _range(fa)
            row = d[:63, 0] / small
            ev.append("order, K=64, +big at k=0, -big at k=j (j=1..63), surviving small products: "
                      + " ".join(f"{x:g}" for x in row))
        elif name.startswith("width"):
            one = d[0::9, 0]
            kept = [j for j, v in zip(range(1, 60), one) if v != 1.0]
            p = (max(kept) + 1) if kept else None
            ev.append(f"width: 1 + 2^-j differs from 1 up to j = {max(kept) if kept else 'none'}: "
                      f"{'about ' + str(p) + ' significand bits kept' if p else 'no bit kept'}")
            if p and 9 * (p - 1) + 4 < d.shape[0]:
                tie = d[9 * (p - 1), 0] if 9 * (p - 1) < d.shape[0] else None
                above = d[9 * (p - 1) + 4, 0] if 9 * (p - 1) + 4 < d.shape[0] else None
                ev.append(f"  1 + 2^-{p} (a tie at that width) -> {float(tie)!r} (nearest even: 1.0); "
                          f"2^-{p + 1} + 2^-{p} + 1 (small terms first) -> {float(above)!r} (nearest even: "
                          f"{1 + 2.0 ** (1 - p)!r}; truncation: 1.0)")
        elif name.startswith("FMA"):
            ev.append(f"FMA probe (c at k=0, a*a at k=1/2/3, c at k=2 after a*a): {[float(x) for x in d[:4, 0]]}")
        elif name.startswith("specials"):
            labels = ["-0 + -0", "-0 + +0", "1 - 1", "Inf + 1", "Inf - Inf", "NaN + 1", "1 + Inf",
                      "subnormal", "2 subnormals", "min normal - half"]
            vals = [f"{lbl} = {float(x)!r}" for lbl, x in zip(labels, d[:, 0])]
            ev.append("specials: " + ", ".join(vals))
    return ev


__all__ = ["MatmulFn", "ProbeResult", "kernel_candidates", "probe_matmul", "unit_candidates"]

"""The probe of mma.md §11 recovers the record it is given: qref's own kernel records, and mmasim 2.1.1's
instruction models (a seeded sample of unscaled instructions, every arithmetic signature at least once).

Recovered means: the record the probe reports equals the one given, or gives identical bits to it on the probe's
validation set and on an independent seeded set drawn here (the definition of equivalence of mma.md §11 6)."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import qref
import qref.mma as qm
from qref.mma.bits import storage_dtype
from qref.mma.probe import _bits, _run_record, unit_candidates

sys.path.insert(0, str(Path(__file__).parent))


def _independent(fa: str, fb: str, K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    big = 6.0 if fa == "float4_e2m1fn" or fb == "float4_e2m1fn" else 60.0
    A = np.clip(rng.standard_normal((16, K)) * np.exp2(rng.integers(-6, 4, (16, K))), -big, big)
    B = np.clip(rng.standard_normal((K, 16)) * np.exp2(rng.integers(-6, 4, (K, 16))), -big, big)
    return A.astype(storage_dtype(fa)), B.astype(storage_dtype(fb))


def _same_bits(r1: object, r2: object, fa: str, fb: str, fd: str, K: int) -> bool:
    A, B = _independent(fa, fb, K, 99)
    return bool(np.array_equal(_bits(_run_record(r1, A, B, fa, fb, fd)), _bits(_run_record(r2, A, B, fa, fb, fd))))


RECORDS = [
    qm.KernelAccumulation(),
    qm.KernelAccumulation(lanes=8, reduction="halving"),
    qm.KernelAccumulation(lanes=16, reduction="pairwise"),
    qm.KernelAccumulation(lanes=3, products="rounded"),
    qm.KernelAccumulation(order="pairwise", products="rounded"),
    qm.KernelAccumulation(accumulator="float64", lanes=4, reduction="halving"),
    qm.KernelAccumulation(subnormals="flush", lanes=2),
]


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r.name())
def test_probe_recovers_qref_records(rec: qm.KernelAccumulation) -> None:
    ins = qm.kernel(rec)
    res = qref.probe_matmul(lambda A, B: qm.matmul(A, B, instruction=ins), blocks=False, runs=1)
    assert res.record is not None, res.report()
    assert res.record == rec or _same_bits(res.record, rec, "float32", "float32", "float32", 300), res.report()


def test_probe_recovers_blocks_and_a_halved_remainder() -> None:
    """A level-3 BLAS's K loop: blocks of 448, a remainder in (448, 896) cut in halves (found by the K = 2048
    cancellation probe, not in the fixed block list)."""
    rec = qm.KernelAccumulation(block=448, block_split="halve_remainder")
    ins = qm.kernel(rec)
    res = qref.probe_matmul(lambda A, B: qm.matmul(A, B, instruction=ins), runs=1, block_k=1024)
    assert res.record == rec, res.report()
    assert any("j=448..735" in e for e in res.evidence), res.evidence  # 1024 = 448 + 288 + 288


def test_probe_reports_nondeterminism() -> None:
    rng = np.random.default_rng(0)

    def noisy(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            D = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
        return D + np.float32(rng.integers(0, 2)) * np.float32(2.0**-20)

    res = qref.probe_matmul(noisy, blocks=False)
    assert res.record is None and res.nondeterministic
    assert "no record fits" in res.report() and "run to run" in res.report()


def test_probe_says_none_fits() -> None:
    """float64 products rounded once to float32 after a float64 sum of pairs in reverse order: not in the grid."""
    def odd(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        P = A.astype(np.float64)[:, :, None] * B.astype(np.float64)[None, :, :]
        s = np.zeros((A.shape[0], B.shape[1]), np.float32)
        with np.errstate(all="ignore"):
            for k in range(A.shape[1] - 1, -1, -1):
                s = (s + P[:, k].astype(np.float32)).astype(np.float32)
        return s

    res = qref.probe_matmul(odd, blocks=False, runs=1)
    assert res.record is None and "no record fits" in res.report()


# -------------------------------------------------------------------------------------------------------------
# mmasim 2.1.1
# -------------------------------------------------------------------------------------------------------------
def _sample(n: int) -> list[qm.Instruction]:
    """Every (formats, arithmetic) signature of the unscaled instructions once, then seeded others up to n."""
    ins = [i for i in qm.instructions() if not i.scaled]
    first: dict[object, qm.Instruction] = {}
    for i in ins:
        first.setdefault((i.a_format, i.b_format, i.c_format, i.d_format, i.arithmetic), i)
    chosen = list(first.values())
    rest = [i for i in ins if i not in chosen]
    rng = np.random.default_rng(7)
    chosen += [rest[j] for j in rng.choice(len(rest), max(0, n - len(chosen)), replace=False)]
    return chosen


def _mmasim_fn(O: object, ins: qm.Instruction) -> object:
    op = O.oracle(ins)  # type: ignore[attr-defined]

    def fn(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        M, K = A.shape
        N = B.shape[1]
        pad = (-K) % ins.k  # a kernel pads K to the instruction's k with zeros
        a = np.broadcast_to(A[:, None, :], (M, N, K))
        b = np.broadcast_to(B.T[None], (M, N, K))
        if pad:
            a = np.concatenate([a, np.zeros((M, N, pad), a.dtype)], -1)
            b = np.concatenate([b, np.zeros((M, N, pad), b.dtype)], -1)
        c = np.zeros((M, N), storage_dtype(ins.c_format))
        return O.run_oracle_dot(ins, a, b, c, op=op).view(storage_dtype(ins.d_format))  # type: ignore[attr-defined]

    return fn


def _probe_mmasim(instrs: list[qm.Instruction]) -> list[str]:
    import test_mma_oracle as O

    threads = O.torch.get_num_threads()
    O.torch.set_num_threads(1)
    bad = []
    try:
        for ins in instrs:
            cands = unit_candidates(ins.a_format, ins.b_format, ins.d_format)
            res = qref.probe_matmul(_mmasim_fn(O, ins), ins.a_format, ins.b_format, ins.d_format, candidates=cands,
                                    blocks=False, runs=1)
            r = res.record
            ok = r is not None and (r == ins.arithmetic or (
                ins.arithmetic in res.equivalent
                and _same_bits(r, ins.arithmetic, ins.a_format, ins.b_format, ins.d_format, 4 * ins.k)))
            if not ok:
                bad.append(f"{ins.name}: given {ins.arithmetic}, fitted {r}")
    finally:
        O.torch.set_num_threads(threads)
    return bad


def test_probe_recovers_mmasim_signatures_sample() -> None:
    """7 instructions of distinct arithmetic families (the full sample of 200 is the slow test below)."""
    pytest.importorskip("mmasim")
    sig = _sample(0)
    pick = [sig[j] for j in np.linspace(0, len(sig) - 1, 7).astype(int)]
    assert not _probe_mmasim(pick)


@pytest.mark.slow
@pytest.mark.parametrize("part", range(3))
def test_probe_recovers_120_mmasim_instructions(part: int) -> None:
    """120 unscaled instructions (every (formats, arithmetic) signature once, 91, and 29 seeded others with another
    k or layout), each probed through mmasim's own dpa; in three parts of 40 so that parallel test workers share
    them."""
    pytest.importorskip("mmasim")
    instrs = _sample(120)
    assert len(instrs) == 120
    bad = _probe_mmasim(instrs[part::3])
    assert not bad, bad[:5]


def test_unit_candidates_hold_the_neighbours() -> None:
    c = unit_candidates("float8_e4m3fn", "float8_e4m3fn", "float32")
    h = qm.get("Hopper", "wgmma", "m64n8k32.f32.e4m3.e4m3").arithmetic
    assert h in c and any(getattr(x, "frac_bits", None) == h.frac_bits + 1 for x in c)
    assert ml_dtypes.float8_e4m3fn  # the operand dtype the candidates read

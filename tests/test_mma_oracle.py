"""Bridge between qref.mma operands (numpy, ml_dtypes) and mmasim 2.1.1 (torch), mma.md §8 (no tests here)."""

from __future__ import annotations

from collections.abc import Iterator

import ml_dtypes
import numpy as np

import qref.mma as qm

torch = __import__("pytest").importorskip("torch")
mmasim_nv = __import__("pytest").importorskip("mmasim.nv_ptx")
mmasim_amd = __import__("pytest").importorskip("mmasim.amd")

_TORCH8 = {"float8_e4m3fn": "float8_e4m3fn", "ue4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
           "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
           "float8_e8m0fnu": "float8_e8m0fnu"}
_SUB6 = ("float6_e3m2fn", "float6_e2m3fn", "float4_e2m1fn")


def to_torch(x: np.ndarray, fmt: str, packed: bool = False) -> torch.Tensor:
    """mmasim's operand convention: fp6 in bits 5:0, fp4 in bits 5:2 of a byte (kind::f8f6f4), or two fp4 per
    byte, the even element in the high nibble (kind::mxf4*)."""
    x = np.ascontiguousarray(x)
    if fmt in ("float64", "float32", "tf32", "float16"):
        return torch.from_numpy(x.copy())
    if fmt == "bfloat16":
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    if fmt in _TORCH8:
        return torch.from_numpy(x.view(np.uint8).copy()).view(getattr(torch, _TORCH8[fmt]))
    assert fmt in _SUB6
    u = x.view(np.uint8) & 0x3F
    if packed:
        assert fmt == "float4_e2m1fn"
        u = (u[..., 0::2] << 4) | u[..., 1::2]
    elif fmt == "float4_e2m1fn":
        u = u << 2
    return torch.from_numpy(u.astype(np.uint8).copy())


def from_torch(t: torch.Tensor) -> np.ndarray:
    """Output bits as unsigned integers."""
    if t.dtype == torch.float64:
        return t.contiguous().view(torch.int64).numpy().view(np.uint64)
    if t.dtype == torch.float32:
        return t.contiguous().view(torch.int32).numpy().view(np.uint32)
    return t.contiguous().view(torch.int16).numpy().view(np.uint16)


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}")


def oracle(ins: qm.Instruction) -> object:
    cls = {"mma": mmasim_nv.MMA, "mma.block_scale": mmasim_nv.MMABlockScale, "wgmma": mmasim_nv.WGMMA,
           "tcgen05.mma": mmasim_nv.TCGen05MMA, "tcgen05.mma.block_scale": mmasim_nv.TCGen05MMABlockScale,
           "mfma": mmasim_amd.MFMA}[ins.instruction]
    return cls(ins.arch, ins.qualifier)


def packed(ins: qm.Instruction) -> bool:
    return "kind::mxf4" in ins.qualifier


def run_oracle_dot(ins: qm.Instruction, a: np.ndarray, b: np.ndarray, c: np.ndarray, sa: np.ndarray | None = None,
                   sb: np.ndarray | None = None, op: object = None) -> np.ndarray:
    """mmasim's dpa on the same inner products (bits of d)."""
    op = op or oracle(ins)
    pk = packed(ins)
    args = [to_torch(a, ins.a_format, pk), to_torch(b, ins.b_format, pk), to_torch(c, ins.c_format)]
    if ins.scaled:
        args += [to_torch(sa, ins.scale_format), to_torch(sb, ins.scale_format)]
    return from_torch(op.dpa(*args))


def run_oracle_tile(ins: qm.Instruction, A: np.ndarray, B: np.ndarray, C: np.ndarray, sa: np.ndarray | None = None,
                    sb: np.ndarray | None = None) -> np.ndarray:
    op = oracle(ins)
    pk = packed(ins)
    if pk:  # mmasim unpacks along the last axis: give it B^T packed, then transpose back
        args = [to_torch(A, ins.a_format, True), to_torch(np.ascontiguousarray(B.T), ins.b_format, True).T,
                to_torch(C, ins.c_format)]
    else:
        args = [to_torch(A, ins.a_format), to_torch(B, ins.b_format), to_torch(C, ins.c_format)]
    if ins.scaled:
        args += [to_torch(sa, ins.scale_format), to_torch(sb, ins.scale_format)]
    return from_torch(op(*args))


# -------------------------------------------------------------------------------------------------------------
# seeded inputs: random codes and adversarial patterns (mma.md §8)
# -------------------------------------------------------------------------------------------------------------
def _dtype(fmt: str) -> np.dtype:
    from qref.mma.bits import storage_dtype

    return storage_dtype(fmt)


def _nbits(fmt: str) -> int:
    return {"float64": 64, "float32": 32, "tf32": 32, "float16": 16, "bfloat16": 16, "float6_e3m2fn": 6,
            "float6_e2m3fn": 6, "float4_e2m1fn": 4}.get(fmt, 8)


def _from_codes(codes: np.ndarray, fmt: str) -> np.ndarray:
    nb = _nbits(fmt)
    u = {64: np.uint64, 32: np.uint32, 16: np.uint16}.get(nb, np.uint8)
    return codes.astype(u).view(_dtype(fmt))


def finite(fmt: str, values: np.ndarray) -> np.ndarray:
    """float64 values rounded into fmt (RNE via ml_dtypes / numpy casts)."""
    if fmt in ("tf32",):
        return values.astype(np.float32)
    if fmt == "ue4m3":
        return np.abs(values).astype(ml_dtypes.float8_e4m3fn)
    return values.astype(_dtype(fmt))


def random_codes(rng: np.random.Generator, fmt: str, shape: tuple[int, ...], special: float = 0.0) -> np.ndarray:
    """Uniform random bit patterns; non-finite ones replaced by finite ones except a fraction ``special``."""
    nb = _nbits(fmt)
    if nb == 64:
        c = rng.integers(0, 2**63, size=shape, dtype=np.uint64) * np.uint64(2) + rng.integers(
            0, 2, size=shape, dtype=np.uint64)
    else:
        c = rng.integers(0, 2**nb, size=shape, dtype=np.uint64)
    x = _from_codes(c, fmt)
    with np.errstate(all="ignore"):
        bad = ~np.isfinite(x.astype(np.float64))
    keep = rng.random(shape) < special
    repl = finite(fmt, rng.standard_normal(shape))
    return np.where(bad & ~keep, repl, x)


def exponent_spread(rng: np.random.Generator, fmt: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values with random exponents over the format's range (magnitudes 2^-lo .. 2^hi)."""
    import qref.formats as qf
    from qref.mma.bits import operand_format as _fmt

    f = _fmt(fmt)
    lo, hi = 1 - f.bias - f.mantissa_bits, f.max_exponent if hasattr(f, "max_exponent") else f.bias
    e = rng.integers(lo, hi + 1, size=shape)
    v = rng.choice([-1.0, 1.0], size=shape) * (1 + rng.random(shape)) * np.exp2(e.astype(np.float64))
    _ = qf
    with np.errstate(all="ignore"):
        x = finite(fmt, v)
    return np.where(np.isfinite(x.astype(np.float64)), x, finite(fmt, rng.standard_normal(shape)))


def dense_specials(rng: np.random.Generator, fmt: str, shape: tuple[int, ...], p: float = 0.25) -> np.ndarray:
    """Random codes, a fraction p replaced by random NaN / Inf codes of the format (distinct payloads)."""
    nb = _nbits(fmt)
    x = random_codes(rng, fmt, shape)
    if nb <= 16:
        allc = _from_codes(np.arange(2**nb, dtype=np.uint64), fmt)
        with np.errstate(all="ignore"):
            pool = np.nonzero(~np.isfinite(allc.astype(np.float64)))[0].astype(np.uint64)
        if pool.size == 0:
            return x
        sp = _from_codes(rng.choice(pool, size=shape), fmt)
    else:
        M = 52 if nb == 64 else 23
        top = np.uint64(((1 << (nb - 1 - M)) - 1) << M)
        man = rng.integers(0, 2**M, size=shape, dtype=np.uint64) * (rng.random(shape) < 0.8)
        sign = rng.integers(0, 2, size=shape, dtype=np.uint64) << np.uint64(nb - 1)
        sp = _from_codes(sign | top | man.astype(np.uint64), fmt)
    return np.where(rng.random(shape) < p, sp, x)


def subnormals(rng: np.random.Generator, fmt: str, shape: tuple[int, ...]) -> np.ndarray:
    """Codes with a zero exponent field (subnormals and zeros of both signs)."""
    from qref.mma.bits import operand_format as _fmt

    f = _fmt(fmt)
    M, nb = f.mantissa_bits, _nbits(fmt)
    if not f.zero:  # E8M0 has no subnormals: its smallest codes
        return _from_codes(rng.integers(0, 4, size=shape, dtype=np.uint64), fmt)
    m = rng.integers(0, 2**min(M, 62), size=shape, dtype=np.uint64)
    s = rng.integers(0, 2, size=shape, dtype=np.uint64) << np.uint64(nb - 1) if f.signed else np.uint64(0)
    x = _from_codes(m | s, fmt)
    with np.errstate(all="ignore"):
        bad = ~np.isfinite(x.astype(np.float64))
    return np.where(bad, _from_codes(m, fmt), x)


def cases(ins: qm.Instruction, rng: np.random.Generator, n: int, K: int | None = None
          ) -> Iterator[tuple[str, tuple[np.ndarray, ...]]]:
    """Seeded random and adversarial inner products for one instruction: (pattern, (a, b, c, sa, sb))."""
    K = K or ins.k
    fa, fb, fc = ins.a_format, ins.b_format, ins.c_format
    nb = K // ins.block_size if ins.scaled else 0

    def scales(kind: str) -> tuple[np.ndarray | None, np.ndarray | None]:
        if not ins.scaled:
            return None, None
        fs = ins.scale_format
        if kind == "moderate":
            v = np.exp2(rng.integers(-4, 5, size=(2, n, nb)).astype(np.float64))
            if fs == "ue4m3":
                v = v * rng.choice([1.0, 1.125, 1.5, 1.875], size=v.shape)
            return finite(fs, v[0]), finite(fs, v[1])
        if fs == "float8_e8m0fnu":
            pool = np.array([0, 1, 2, 100, 126, 127, 128, 200, 253, 254, 255], np.uint64)
        else:
            pool = np.array([0, 1, 2, 7, 8, 0x38, 0x70, 0x7D, 0x7E, 0x7F, 0x80, 0xFE, 0xFF], np.uint64)
        return (_from_codes(rng.choice(pool, size=(n, nb)), fs), _from_codes(rng.choice(pool, size=(n, nb)), fs))

    def rc(fmt: str, shape: tuple[int, ...], special: float = 0.0) -> np.ndarray:
        return random_codes(rng, fmt, shape, special)

    sa, sb = scales("moderate")
    yield "random codes", (rc(fa, (n, K)), rc(fb, (n, K)), rc(fc, (n,)), sa, sb)
    yield "dense NaN/Inf (payload rules)", (dense_specials(rng, fa, (n, K)), dense_specials(rng, fb, (n, K)),
                                            dense_specials(rng, fc, (n,)), sa, sb)
    sa, sb = scales("extreme")
    yield "random codes, NaN/Inf, scales at extremes", (rc(fa, (n, K), 0.03), rc(fb, (n, K), 0.03),
                                                       rc(fc, (n,), 0.05), sa, sb)
    # cancellation: pairs of equal and opposite products, a small perturbation and a small c
    a = finite(fa, rng.standard_normal((n, K)))
    b = finite(fb, rng.standard_normal((n, K)))
    a[:, 1::2] = -a[:, 0::2]
    b[:, 1::2] = b[:, 0::2]
    j = rng.integers(0, K, size=n)
    a[np.arange(n), j] = finite(fa, rng.standard_normal(n) * 2.0 ** rng.integers(-12, 0, size=n))
    c = finite(fc, rng.standard_normal(n) * 2.0 ** rng.integers(-30, 0, size=n))
    sa, sb = scales("moderate")
    yield "cancellation", (a, b, c, sa, sb)
    yield "exponent spread beyond F", (exponent_spread(rng, fa, (n, K)), exponent_spread(rng, fb, (n, K)),
                                       exponent_spread(rng, fc, (n,)), sa, sb)
    sub_a = np.where(rng.random((n, K)) < 0.5, subnormals(rng, fa, (n, K)), rc(fa, (n, K)))
    sub_b = np.where(rng.random((n, K)) < 0.5, subnormals(rng, fb, (n, K)), rc(fb, (n, K)))
    yield "subnormals", (sub_a, sub_b, subnormals(rng, fc, (n,)), sa, sb)
    za, zb = rc(fa, (n, K)), rc(fb, (n, K))
    za = np.where(rng.random((n, K)) < 0.6, finite(fa, rng.choice([0.0, -0.0], size=(n, K))), za)
    zb = np.where(rng.random((n, K)) < 0.3, finite(fb, rng.choice([0.0, -0.0], size=(n, K))), zb)
    zc = np.where(rng.random(n) < 0.5, finite(fc, rng.choice([0.0, -0.0], size=n)), rc(fc, (n,)))
    yield "zero products", (za, zb, zc, sa, sb)
    big = finite(fc, rng.choice([-1.0, 1.0], size=n) * 2.0 ** rng.integers(8, 15, size=n))
    yield "C dominating", (finite(fa, rng.standard_normal((n, K)) * 2.0**-6),
                           finite(fb, rng.standard_normal((n, K)) * 2.0**-6), big, sa, sb)
    # exact cancellation to zero at large exponents (and, when scaled, large scales): the sum is exactly 0
    a = exponent_spread(rng, fa, (n, K))
    a[:, 1::2] = -a[:, 0::2]
    b = exponent_spread(rng, fb, (n, K))
    b[:, 1::2] = b[:, 0::2]
    sa, sb = scales("extreme")
    yield "exact cancellation at large exponents", (a, b, finite(fc, rng.choice([0.0, -0.0, 1e-30], size=n)),
                                                    sa, sb)

"""GEMM cases: golden D of matrix-unit instructions for batched inner products and small GEMMs (docs/spec/mma.md).

Not registered yet (the leading underscore keeps it out of ``family_names()``); registering the family is renaming
this module to ``gemm.py`` (see the module's ``FAMILY``) and regenerating the suite.

Operations and ids (``<arch>`` the architecture in lower_snake_case, e.g. ``ada_lovelace``):

  mma   ``gemm/mma/<arch>/<instruction>/<qualifier>/<category>`` (mma.md §3, §4.2). Inputs ``a`` (n, K), ``b``
        (n, K), ``c`` (n,) and for block-scaled instructions ``scale_a`` / ``scale_b`` (n, K / block): operands
        as the instruction reads them (float64 / float32 / float16 / bfloat16 arrays; 8/6/4-bit elements and
        scales as unsigned codes named in ``array_formats``; tf32 / xf32 as float32 whose 13 low mantissa bits
        the unit ignores; ue4m3 scales as float8_e4m3fn codes whose sign bit the unit ignores). Expected ``d``
        (n,) = DPA(a[i], b[i], c[i]) in the D format, bit for bit, NaN bits included (K = the instruction's k).
  gemm  ``gemm/gemm/<arch>/<instruction>/<qualifier>/<variant>`` (mma.md §7). Inputs ``a`` (M, K), ``b`` (K, N),
        ``c`` (M, N) (float32 when promoted); expected ``d`` (M, N): D = C chained through C over K steps of k
        (variant ``chain``), or with promotion into float32 every 2k elements (variant ``promote_2k``).

Categories: random (finite random codes), special (random codes with NaN / Inf), cancellation (pairs of
opposite products, a small remainder, a small c), spread (one large product, the others beyond F below it),
subnormal (zero exponent fields), zero_products, c_dominating and, for block-scaled instructions,
scales_extreme (E8M0 bytes 0, 1, 126-128, 253-255; UE4M3 0, 1, 0x7E, 0x7F and signed codes).
Expected outputs come from qref.mma, which tests/test_mma.py holds to mmasim 2.1.1 bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np

from ... import mma as qm
from ...mma.bits import decode, storage_dtype
from .. import random as qrandom
from ..case import Case

FAMILY = "gemm"
N_DOT = 16
INSTRUCTIONS = (
    ("Volta", "mma", "m8n8k4.f32.f16.f16.f32"), ("Volta", "mma", "m8n8k4.f16.f16.f16.f16"),
    ("Turing", "mma", "m16n8k8.f32.f16.f16.f32"),
    ("Ampere", "mma", "m16n8k16.f32.bf16.bf16.f32"), ("Ampere", "mma", "m16n8k8.f32.tf32.tf32.f32"),
    ("Ampere", "mma", "m16n8k16.f16.f16.f16.f16"), ("Ampere", "mma", "m8n8k4.f64.f64.f64.f64"),
    ("Ada Lovelace", "mma", "m16n8k32.f32.e4m3.e4m3.f32"), ("Ada Lovelace", "mma", "m16n8k32.f16.e5m2.e4m3.f16"),
    ("Hopper", "mma", "m16n8k16.f64.f64.f64.f64"), ("Hopper", "wgmma", "m64n8k32.f32.e4m3.e4m3"),
    ("Hopper", "wgmma", "m64n8k32.f16.e5m2.e5m2"), ("Hopper", "wgmma", "m64n8k16.f32.bf16.bf16"),
    ("Hopper", "wgmma", "m64n8k8.f32.tf32.tf32"),
    ("Blackwell", "tcgen05.mma", "m64n8k16.kind::f16.f32.f16.f16"),
    ("Blackwell", "tcgen05.mma", "m64n8k32.kind::f8f6f4.f32.e2m1.e3m2"),
    ("Blackwell", "tcgen05.mma", "m64n8k32.kind::f8f6f4.f16.e2m3.e4m3"),
    ("Blackwell", "tcgen05.mma.block_scale", "m128n8k32.kind::mxf8f6f4.block32.f32.e4m3.e2m1.ue8m0"),
    ("Blackwell", "tcgen05.mma.block_scale", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"),
    ("RTX Blackwell", "mma", "m16n8k32.kind::f8f6f4.f32.e3m2.e2m3.f32"),
    ("RTX Blackwell", "mma.block_scale", "m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0"),
    ("CDNA1", "mfma", "f32_32x32x8f16"), ("CDNA1", "mfma", "f32_32x32x4bf16"), ("CDNA1", "mfma", "f32_32x32x2f32"),
    ("CDNA2", "mfma", "f32_32x32x8bf16_1k"), ("CDNA2", "mfma", "f32_32x32x4bf16"), ("CDNA2", "mfma", "f64_16x16x4f64"),
    ("CDNA3", "mfma", "f32_16x16x16_f16"), ("CDNA3", "mfma", "f32_16x16x8_xf32"),
    ("CDNA3", "mfma", "f32_16x16x32_fp8_bf8"), ("CDNA3", "mfma", "f32_16x16x4_f32"),
)
GEMMS = (("Ampere", "mma", "m16n8k16.f32.bf16.bf16.f32"), ("Hopper", "wgmma", "m64n8k32.f32.e4m3.e4m3"),
         ("RTX Blackwell", "mma.block_scale", "m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0"),
         ("CDNA3", "mfma", "f32_16x16x32_fp8_fp8"), ("CDNA2", "mfma", "f32_16x16x16bf16_1k"))
CATEGORIES = {
    "random": (("random",), "finite random codes"),
    "special": (("special", "random"), "random codes with NaN / Inf kept"),
    "cancellation": (("edge",), "pairs of opposite products, one small remainder, a small c"),
    "spread": (("edge",), "one large product, the other products beyond F below it"),
    "subnormal": (("subnormal",), "operands with zero exponent fields"),
    "zero_products": (("edge",), "half the products zero (both zero signs)"),
    "c_dominating": (("edge",), "a large c and small products"),
    "scales_extreme": (("edge", "boundary"), "block scales at their extremes"),
}
_SPEC = ("mma.md §2", "mma.md §3", "mma.md §4.2")
_NBITS = {"float64": 64, "float32": 32, "tf32": 32, "float16": 16, "bfloat16": 16, "float6_e3m2fn": 6,
          "float6_e2m3fn": 6, "float4_e2m1fn": 4}
_LOGICAL = {"float64": "float64", "float32": "float32", "tf32": "float32", "float16": "float16",
            "bfloat16": "bfloat16"}


def _slug(arch: str) -> str:
    return arch.lower().replace(" ", "_")


def _from_codes(codes: np.ndarray, fmt: str) -> np.ndarray:
    nb = _NBITS.get(fmt, 8)
    u = {64: np.uint64, 32: np.uint32, 16: np.uint16}.get(nb, np.uint8)
    return codes.astype(u).view(storage_dtype(fmt))


def _codes(label: str, fmt: str, shape: tuple[int, ...], keep_special: bool) -> np.ndarray:
    n = int(np.prod(shape))
    c = qrandom.bits(label, n, _NBITS.get(fmt, 8)).reshape(shape)
    x = _from_codes(c, fmt)
    if keep_special:
        return x
    p = decode(x, fmt)
    return np.where(p.nan | p.inf, _from_codes(c & np.uint64(0x7), fmt), x)  # a small finite code instead


def _values(label: str, fmt: str, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    """Float values with exponents in [lo, hi] (random binades), rounded into ``fmt`` (nearest even)."""
    n = int(np.prod(shape))
    v = qrandom.floats_in_binades(label, n, "float64", lo, hi).view(np.float64).reshape(shape)
    with np.errstate(all="ignore"):
        x = v.astype(storage_dtype(fmt)) if fmt != "ue4m3" else np.abs(v).astype(ml_dtypes.float8_e4m3fn)
    return x


def _operands(ins: qm.Instruction, cat: str, label: str) -> dict[str, np.ndarray]:
    K, n = ins.k, N_DOT
    fa, fb, fc = ins.a_format, ins.b_format, ins.c_format
    special = cat == "special"
    a = _codes(label + "/a", fa, (n, K), special)
    b = _codes(label + "/b", fb, (n, K), special)
    c = _codes(label + "/c", fc, (n,), special)
    if cat == "cancellation":
        a = _values(label + "/va", fa, (n, K), -2, 2)
        b = _values(label + "/vb", fb, (n, K), -2, 2)
        a[:, 1::2] = -a[:, 0::2]
        b[:, 1::2] = b[:, 0::2]
        a[:, 0] = _values(label + "/r", fa, (n,), -6, -3)
        c = _values(label + "/vc", fc, (n,), -20, -10)
    elif cat == "spread":
        a = _values(label + "/va", fa, (n, K), -8, -4)
        b = _values(label + "/vb", fb, (n, K), -8, -4)
        a[:, 0] = _values(label + "/big", fa, (n,), 2, 3)
        b[:, 0] = _values(label + "/big_b", fb, (n,), 2, 3)
        c = _values(label + "/vc", fc, (n,), -12, -6)
    elif cat == "subnormal":
        a = _sub(label + "/a", fa, (n, K))
        b = np.where(qrandom.bits(label + "/m", n * K, 1).reshape(n, K) == 1, _sub(label + "/b", fb, (n, K)), b)
        c = _sub(label + "/c", fc, (n,))
    elif cat == "zero_products":
        z = qrandom.bits(label + "/z", n * K, 2).reshape(n, K)
        zero = _from_codes(np.zeros((n, K), np.uint64), fa)
        negz = np.negative(zero.astype(np.float32)).astype(storage_dtype(fa)) if fa not in (
            "float8_e4m3fnuz", "float8_e5m2fnuz") else zero
        a = np.where(z == 0, zero, np.where(z == 1, negz, a))
    elif cat == "c_dominating":
        a = _values(label + "/va", fa, (n, K), -5, -3)
        b = _values(label + "/vb", fb, (n, K), -5, -3)
        c = _values(label + "/vc", fc, (n,), 8, 12)
    out = {"a": a, "b": b, "c": c}
    if ins.scaled:
        assert ins.block_size is not None and ins.scale_format is not None
        nb = K // ins.block_size
        if cat == "scales_extreme":
            pool = (np.array([0, 1, 2, 126, 127, 128, 253, 254, 255], np.uint64) if ins.scale_format ==
                    "float8_e8m0fnu" else np.array([0, 1, 2, 0x38, 0x7E, 0x7F, 0x80, 0xB8, 0xFF], np.uint64))
            out["scale_a"] = _from_codes(pool[qrandom.below(label + "/sa", n * nb, len(pool))].reshape(n, nb),
                                         ins.scale_format)
            out["scale_b"] = _from_codes(pool[qrandom.below(label + "/sb", n * nb, len(pool))].reshape(n, nb),
                                         ins.scale_format)
        else:
            out["scale_a"] = _values(label + "/sa", ins.scale_format, (n, nb), -3, 3)
            out["scale_b"] = _values(label + "/sb", ins.scale_format, (n, nb), -3, 3)
    return out


def _sub(label: str, fmt: str, shape: tuple[int, ...]) -> np.ndarray:
    from ...mma.bits import operand_format as _fmt

    f = _fmt(fmt)
    n = int(np.prod(shape))
    if not f.zero:
        return _from_codes(qrandom.below(label, n, 4).reshape(shape), fmt)
    m = qrandom.bits(label, n, max(f.mantissa_bits, 1)).reshape(shape) & np.uint64((1 << f.mantissa_bits) - 1)
    s = qrandom.bits(label + "/s", n, 1).reshape(shape) << np.uint64(f.bits - 1) if f.signed else np.uint64(0)
    x = _from_codes(m | s, fmt)
    p = decode(x, fmt)
    return np.where(p.nan, _from_codes(m, fmt), x)


def _store(x: np.ndarray, fmt: str) -> tuple[np.ndarray, str | None]:
    """An operand as a case array: floats of a logical dtype as they are, narrow formats as unsigned codes."""
    if fmt in _LOGICAL:
        return np.ascontiguousarray(x).view(storage_dtype(_LOGICAL[fmt])), None
    return np.ascontiguousarray(x).view(np.uint8), ("float8_e4m3fn" if fmt == "ue4m3" else fmt)


def _params(ins: qm.Instruction) -> dict[str, Any]:
    return {"arch": ins.arch, "instruction": ins.instruction, "qualifier": ins.qualifier, "m": ins.m, "n": ins.n,
            "k": ins.k, "a_format": ins.a_format, "b_format": ins.b_format, "c_format": ins.c_format,
            "d_format": ins.d_format, "scale_format": ins.scale_format, "block_size": ins.block_size,
            "arithmetic": {k: v for k, v in ins.arithmetic.describe().items()}, "compare": "bits",
            "nan": "bits (canonical or propagated as mma.md §2.3 / §3.9 define)"}


def _case(ins: qm.Instruction, op: str, label: str, inputs: dict[str, np.ndarray], d: np.ndarray,
          tags: tuple[str, ...], desc: str, spec: tuple[str, ...], extra: dict[str, Any] | None = None) -> Case:
    arrays, fmts = {}, {}
    fmt_of = {"a": ins.a_format, "b": ins.b_format, "c": (extra or {}).get("c_format", ins.c_format),
              "scale_a": ins.scale_format, "scale_b": ins.scale_format}
    for k, v in inputs.items():
        arr, f = _store(v, fmt_of[k])  # type: ignore[arg-type]
        arrays[k] = arr
        if f is not None:
            fmts[k] = f
    params = _params(ins)
    params.update(extra or {})
    return Case(id=label, family=FAMILY, operation=op, inputs=arrays, expected={"d": np.ascontiguousarray(d)},
                params=params, array_formats=fmts, tags=tags, spec=spec, description=desc)


def _dot_cases() -> Iterator[Case]:
    for key in INSTRUCTIONS:
        ins = qm.get(*key)
        for cat, (tags, desc) in CATEGORIES.items():
            if cat == "scales_extreme" and not ins.scaled:
                continue
            label = f"{FAMILY}/mma/{_slug(ins.arch)}/{ins.instruction}/{ins.qualifier}/{cat}"
            inp = _operands(ins, cat, label)
            d = ins.dot(inp["a"], inp["b"], inp["c"], inp.get("scale_a"), inp.get("scale_b"))
            yield _case(ins, "mma", label, inp, d, tags, f"{ins.name} ({ins.arithmetic.variant}): d = DPA(a, b, c) "
                        f"per row, K = {ins.k}; {desc}", _SPEC)


def _gemm_cases() -> Iterator[Case]:
    for key in GEMMS:
        ins = qm.get(*key)
        M, N, K = ins.m, 2 * ins.n, 4 * ins.k
        for variant, P in (("chain", None), ("promote_2k", 2 * ins.k)):
            label = f"{FAMILY}/gemm/{_slug(ins.arch)}/{ins.instruction}/{ins.qualifier}/{variant}"
            a = _values(label + "/a", ins.a_format, (M, K), -3, 3)
            b = _values(label + "/b", ins.b_format, (K, N), -3, 3)
            cf = ins.c_format if P is None else "float32"
            c = _values(label + "/c", cf, (M, N), -2, 2)
            inp: dict[str, np.ndarray] = {"a": a, "b": b, "c": c}
            sa = sb = None
            if ins.scaled:
                assert ins.block_size is not None and ins.scale_format is not None
                sa = _values(label + "/sa", ins.scale_format, (M, K // ins.block_size), -2, 2)
                sb = _values(label + "/sb", ins.scale_format, (K // ins.block_size, N), -2, 2)
                inp.update(scale_a=sa, scale_b=sb)
            d = qm.matmul(a, b, c, instruction=ins, scale_a=sa, scale_b=sb, promote_every=P)
            how = "chained through C" if P is None else f"promoted into float32 every {P} elements"
            yield _case(ins, "gemm", label, inp, d, ("random",), f"{ins.name}: D (M={M}, N={N}, K={K}) {how}",
                        ("mma.md §7",), {"promote_every": P, "c_format": cf})


def build_cases(full: bool) -> Iterator[Case]:
    """Every gemm case (module docstring); ``full`` adds nothing yet."""
    yield from _dot_cases()
    yield from _gemm_cases()


__all__ = ["CATEGORIES", "FAMILY", "GEMMS", "INSTRUCTIONS", "N_DOT", "build_cases"]

"""Matrix-unit instructions as records: shape, operand formats and the arithmetic (spec: mma.md §4, §5).

One ``Instruction`` per (arch, instruction, qualifier) that mmasim 2.1.1 models; the qualifier is spelled as
the PTX ISA / AMD ISA name it (``m64n8k32.f32.e4m3.e4m3``, ``f32_16x16x32_fp8_fp8``). The parameters of each
architecture (fractional bits, chunk bytes, zero exponents) are tabulated in mma.md §5 with their sources.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..errors import QrefError, unknown_name
from .algorithms import (
    ExactFusedDot,
    FlushedMulAdd,
    FMAChain,
    GroupScaledFusedDot,
    ScaledTruncatedFusedDot,
    TruncatedFusedDot,
    TwoStageFusedDot,
    _Algorithm,
)
from .bits import OPERAND_FORMATS, check_operand, storage_dtype

ARCHS = ("Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell", "RTX Blackwell", "CDNA1", "CDNA2",
         "CDNA3")
KINDS = ("mma", "mma.block_scale", "wgmma", "tcgen05.mma", "tcgen05.mma.block_scale", "mfma")

PTX_FORMATS = {
    "f64": "float64", "f32": "float32", "tf32": "tf32", "f16": "float16", "bf16": "bfloat16",
    "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e3m2": "float6_e3m2fn", "e2m3": "float6_e2m3fn",
    "e2m1": "float4_e2m1fn", "ue8m0": "float8_e8m0fnu", "ue4m3": "ue4m3",
}
AMD_FORMATS = {"f64": "float64", "f32": "float32", "xf32": "tf32", "f16": "float16", "bf16": "bfloat16",
               "fp8": "float8_e4m3fnuz", "bf8": "float8_e5m2fnuz"}
_ITEMSIZE = {"tf32": 4, "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}


def _itemsize(fmt: str) -> int:
    return _ITEMSIZE.get(fmt, 1)  # 8/6/4-bit operands occupy one byte each


@dataclass(frozen=True)
class Instruction:
    """One matrix-unit instruction (mma.md §4): D (m, n) = MMA(A (m, k), B (k, n), C (m, n)[, scales]).

    D[i, j] = arithmetic.dot(A[i, :], B[:, j], C[i, j][, scale_a[i, :], scale_b[:, j]]). Operands are numpy
    arrays of the storage dtypes of their formats (tf32 as float32, truncated by the unit; ue4m3 as
    float8_e4m3fn, sign ignored; FP6/FP4 unpacked, one element each).
    """

    arch: str
    instruction: str
    qualifier: str
    m: int
    n: int
    k: int
    a_format: str
    b_format: str
    c_format: str
    d_format: str
    arithmetic: _Algorithm
    scale_format: str | None = None
    block_size: int | None = None
    source: str = field(default="mmasim 2.1.1 (nv_ptx/sim.py, amd/sim.py); mma.md §5", compare=False)
    status: str = field(default="verified", compare=False)
    evidence: tuple[str, ...] = field(default=(
        "tests/test_mma.py: record parameters equal mmasim 2.1.1's object (all 4999 instructions)",
        "tests/test_mma.py: 18 outputs of every instruction, 369 tiles and 126,576 inner products of 293 "
        "signatures bit for bit vs mmasim 2.1.1 (seeded random + 8 adversarial patterns, sampled), 0 mismatches"),
        compare=False)

    @property
    def name(self) -> str:
        """'arch/instruction/qualifier'."""
        return f"{self.arch}/{self.instruction}/{self.qualifier}"

    @property
    def scaled(self) -> bool:
        """Whether the instruction takes block scales."""
        return self.scale_format is not None

    def _operands(self, a: object, b: object, c: object, scale_a: object, scale_b: object
                  ) -> tuple[np.ndarray, ...]:
        a = check_operand(a, self.a_format, f"{self.name}: A")
        b = check_operand(b, self.b_format, f"{self.name}: B")
        c = check_operand(c, self.c_format, f"{self.name}: C")
        if self.scaled:
            if scale_a is None or scale_b is None:
                raise QrefError(f"{self.name}: block-scaled; pass scale_a and scale_b ({self.scale_format})")
            assert self.scale_format is not None
            sa = check_operand(scale_a, self.scale_format, f"{self.name}: scale_a")
            sb = check_operand(scale_b, self.scale_format, f"{self.name}: scale_b")
            return a, b, c, sa, sb
        if scale_a is not None or scale_b is not None:
            raise QrefError(f"{self.name}: takes no block scales; drop scale_a / scale_b")
        return a, b, c, None, None  # type: ignore[return-value]

    def dot(self, a: object, b: object, c: object, scale_a: object = None, scale_b: object = None) -> np.ndarray:
        """Batched inner products along the last axis: d[...] = DPA(a[..., :], b[..., :], c[...]) (mma.md §4.2).

        K may be any multiple of the chunk length (and of ``block_size`` for scaled instructions); scale_a and
        scale_b are (..., K / block_size). Returns d in the D format."""
        a, b, c, sa, sb = self._operands(a, b, c, scale_a, scale_b)
        if a.shape[-1] != b.shape[-1]:
            raise QrefError(f"{self.name}: a and b need the same K (last axis), got {a.shape} and {b.shape}")
        shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1], c.shape)
        K = a.shape[-1]
        # a and b keep their own (broadcastable) shapes: each operand is decoded once, the products broadcast
        c = np.broadcast_to(c, shape)
        if self.scaled:
            if self.block_size is not None and K % self.block_size:
                raise QrefError(f"{self.name}: K = {K} is not a multiple of the block size {self.block_size}")
            nb = K // (self.block_size or K)
            np.broadcast_shapes(sa.shape[:-1], sb.shape[:-1], shape)
            if sa.shape[-1] != nb or sb.shape[-1] != nb:
                raise QrefError(f"{self.name}: scales need K / block = {nb} entries on the last axis, got "
                                f"{sa.shape} and {sb.shape}")
        return self.arithmetic.dot(a, b, c, self.a_format, self.b_format, self.c_format, self.d_format, sa, sb,
                                   self.scale_format)

    def __call__(self, A: object, B: object, C: object, scale_a: object = None, scale_b: object = None
                 ) -> np.ndarray:
        """D = MMA(A, B, C[, scale_a, scale_b]) for one tile: A (m, k), B (k, n), C (m, n), scale_a
        (m, k / block), scale_b (k / block, n) (mma.md §4.1)."""
        A, B, C, sa, sb = self._operands(A, B, C, scale_a, scale_b)
        m, n, k = self.m, self.n, self.k
        for nm, x, want in (("A", A, (m, k)), ("B", B, (k, n)), ("C", C, (m, n))):
            if x.shape != want:
                raise QrefError(f"{self.name}: {nm} must have shape {want}, got {x.shape}")
        a = A[:, None, :]
        b = B.T[None, :, :]
        if self.scaled:
            assert self.block_size is not None
            nb = k // self.block_size
            if sa.shape != (m, nb) or sb.shape != (nb, n):
                raise QrefError(f"{self.name}: scale_a must be {(m, nb)} and scale_b {(nb, n)}, got "
                                f"{sa.shape} and {sb.shape}")
            return self.dot(a, b, C, sa[:, None, :], sb.T[None, :, :])
        return self.dot(a, b, C)

    def zeros_c(self) -> np.ndarray:
        """A zero C tile (m, n) in the C format."""
        return np.zeros((self.m, self.n), storage_dtype(self.c_format))


# -------------------------------------------------------------------------------------------------------------
# NVIDIA (mma.md §5.1)
# -------------------------------------------------------------------------------------------------------------
_F8F6F4 = ("e5m2", "e4m3", "e3m2", "e2m3", "e2m1")
_FRAC_BITS = {"Volta": 23, "Turing": 24, "Ampere": 24, "Ada Lovelace": 24, "Hopper": 25, "Blackwell": 25,
              "RTX Blackwell": 25}
_CHUNK_BYTES = {"Volta": 8, "Turing": 16, "Ampere": 16, "Ada Lovelace": 16, "Hopper": 32, "Blackwell": 32,
                "RTX Blackwell": 32}
_ZERO_EXP_F16 = {"Volta": -19, "Turing": -20, "Ampere": -20, "Ada Lovelace": -20, "Hopper": -21, "Blackwell": -21,
                 "RTX Blackwell": -21}

_SM70 = ["m8n8k4.f32.f16.f16.f32", "m8n8k4.f32.f16.f16.f16", "m8n8k4.f16.f16.f16.f16"]
_SM75 = ["m16n8k8.f32.f16.f16.f32", "m16n8k8.f16.f16.f16.f16"]
_SM80 = ["m8n8k4.f64.f64.f64.f64", "m16n8k8.f32.tf32.tf32.f32", "m16n8k4.f32.tf32.tf32.f32",
         "m16n8k16.f32.f16.f16.f32", "m16n8k16.f16.f16.f16.f16", "m16n8k16.f32.bf16.bf16.f32",
         "m16n8k8.f32.bf16.bf16.f32"]
_SM89 = [f"m16n8k{k}.{d}.{a}.{b}.{d}" for k in (32, 16) for d in ("f32", "f16") for a in ("e5m2", "e4m3")
         for b in ("e5m2", "e4m3")]
_SM90 = ["m16n8k16.f64.f64.f64.f64", "m16n8k8.f64.f64.f64.f64", "m16n8k4.f64.f64.f64.f64"]
_SM120 = [f"m16n8k32.kind::f8f6f4.{d}.{a}.{b}.{d}" for d in ("f32", "f16") for a in _F8F6F4 for b in _F8F6F4]
MMA_QUALIFIERS = {
    "Volta": _SM70, "Turing": _SM75 + _SM70, "Ampere": _SM80 + _SM75, "Ada Lovelace": _SM89 + _SM80 + _SM75,
    "Hopper": _SM90 + _SM80 + _SM75, "Blackwell": _SM80 + _SM75, "RTX Blackwell": _SM120 + _SM89 + _SM80 + _SM75,
}
_BS120 = ([f"m16n8k32.kind::mxf8f6f4.block32.f32.{a}.{b}.f32.ue8m0" for a in _F8F6F4 for b in _F8F6F4]
          + ["m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0",
             "m16n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.f32.ue8m0",
             "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue8m0",
             "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3"])
_N8_256 = range(8, 257, 8)
WGMMA_QUALIFIERS = (
    [f"m64n{n}k8.f32.tf32.tf32" for n in _N8_256] + [f"m64n{n}k16.f32.f16.f16" for n in _N8_256]
    + [f"m64n{n}k16.f16.f16.f16" for n in _N8_256] + [f"m64n{n}k16.f32.bf16.bf16" for n in _N8_256]
    + [f"m64n{n}k32.{d}.{a}.{b}" for n in _N8_256 for d in ("f32", "f16") for a in ("e5m2", "e4m3")
       for b in ("e5m2", "e4m3")])
_MN = [(m, n) for m in (64, 128) for n in _N8_256]
TCGEN05_QUALIFIERS = (
    [f"m{m}n{n}k8.kind::tf32.f32.tf32.tf32" for m, n in _MN]
    + [f"m{m}n{n}k16.kind::f16.f32.{t}.{t}" for m, n in _MN for t in ("f16", "bf16")]
    + [f"m{m}n{n}k16.kind::f16.f16.f16.f16" for m, n in _MN]
    + [f"m{m}n{n}k32.kind::f8f6f4.{d}.{a}.{b}" for m, n in _MN for d in ("f32", "f16") for a in _F8F6F4
       for b in _F8F6F4])
TCGEN05_BS_QUALIFIERS = (
    [f"m128n{n}k32.kind::mxf8f6f4.block32.f32.{a}.{b}.ue8m0" for n in _N8_256 for a in _F8F6F4 for b in _F8F6F4]
    + [f"m128n{n}k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0" for n in _N8_256]
    + [f"m128n{n}k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.ue8m0" for n in _N8_256]
    + [f"m128n{n}k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.{s}" for n in _N8_256 for s in ("ue8m0", "ue4m3")])


def _mnk(shape: str) -> tuple[int, int, int]:
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


def _truncated(F: int, chunk: int, d: str, e_zero_f16: int, e8m13: bool = False) -> TruncatedFusedDot:
    """T-FDPA parameters (mma.md §5.1): FP16 outputs round to nearest even, FP32 outputs truncate (to E8M13
    for the FP8 units of Ada Lovelace and Hopper); the zero exponent of FP32 outputs is e_zero_f16 - 112."""
    if d == "float16":
        return TruncatedFusedDot(F, chunk, e_zero_f16, output_rounding="nearest_even", output_frac_bits=10)
    return TruncatedFusedDot(F, chunk, e_zero_f16 - 112, output_frac_bits=13 if e8m13 else 23)


_FP8 = ("float8_e4m3fn", "float8_e5m2")


def _nv_mma(arch: str, q: str) -> Instruction:
    parts = q.split(".")
    if len(parts) == 6:
        shape, _, d, a, b, c = parts
    else:
        shape, d, a, b, c = parts
    m, n, k = _mnk(shape)
    fa, fb, fc, fd = (PTX_FORMATS[t] for t in (a, b, c, d))
    if fa == "float64":
        alg: _Algorithm = FMAChain()
    else:
        F, chunk_bytes, ez = _FRAC_BITS[arch], _CHUNK_BYTES[arch], _ZERO_EXP_F16[arch]
        if arch == "Turing" and q in _SM70:  # Turing runs the sm_70 shapes with Volta's unit
            F, chunk_bytes, ez = 23, 8, -19
        e8m13 = arch == "Ada Lovelace" and fa in _FP8
        if e8m13:
            F = 13
        alg = _truncated(F, chunk_bytes // _itemsize(fa), fd, ez, e8m13)
    return Instruction(arch, "mma", q, m, n, k, fa, fb, fc, fd, alg)


_GROUP_SCALED = GroupScaledFusedDot(group_size=16, frac_bits=35, chunk=64, zero_exponent=-139)
_SCALED = ScaledTruncatedFusedDot(frac_bits=25, chunk=32, zero_exponent=-133)


def _nv_block_scale(arch: str, instr: str, q: str) -> Instruction:
    parts = q.split(".")
    if instr == "mma.block_scale":
        shape, _, blk, d, a, b, c, s = parts
    else:
        shape, _, blk, d, a, b, s = parts
        c = d
    m, n, k = _mnk(shape)
    alg: _Algorithm = _GROUP_SCALED if k == 64 else _SCALED
    return Instruction(arch, instr, q, m, n, k, PTX_FORMATS[a], PTX_FORMATS[b], PTX_FORMATS[c], PTX_FORMATS[d],
                       alg, scale_format=PTX_FORMATS[s], block_size=int(blk.removeprefix("block")))


def _nv_wgmma(q: str) -> Instruction:
    shape, d, a, b = q.split(".")
    m, n, k = _mnk(shape)
    fa, fb, fd = PTX_FORMATS[a], PTX_FORMATS[b], PTX_FORMATS[d]
    fp8 = fa in _FP8
    alg = _truncated(13 if fp8 else 25, 32 // _itemsize(fa), fd, -21, fp8)
    return Instruction("Hopper", "wgmma", q, m, n, k, fa, fb, fd, fd, alg)


def _nv_tcgen05(q: str) -> Instruction:
    shape, _, d, a, b = q.split(".")
    m, n, k = _mnk(shape)
    fa, fb, fd = PTX_FORMATS[a], PTX_FORMATS[b], PTX_FORMATS[d]
    alg = _truncated(25, 32 // _itemsize(fa), fd, -21)
    return Instruction("Blackwell", "tcgen05.mma", q, m, n, k, fa, fb, fd, fd, alg)


# -------------------------------------------------------------------------------------------------------------
# AMD (mma.md §5.2)
# -------------------------------------------------------------------------------------------------------------
_CDNA1 = ["f32_32x32x2f32", "f32_32x32x1f32", "f32_16x16x4f32", "f32_16x16x1f32", "f32_4x4x1f32",
          "f32_32x32x8f16", "f32_32x32x4f16", "f32_16x16x16f16", "f32_16x16x4f16", "f32_4x4x4f16",
          "f32_32x32x4bf16", "f32_32x32x2bf16", "f32_16x16x8bf16", "f32_16x16x2bf16", "f32_4x4x2bf16"]
_CDNA2 = ["f64_16x16x4f64", "f64_4x4x4f64", "f32_32x32x8bf16_1k", "f32_32x32x4bf16_1k", "f32_16x16x16bf16_1k",
          "f32_16x16x4bf16_1k", "f32_4x4x4bf16_1k"]
_CDNA3 = ["f64_16x16x4_f64", "f64_4x4x4_4b_f64", "f32_32x32x1_2b_f32", "f32_16x16x1_4b_f32", "f32_4x4x1_16b_f32",
          "f32_32x32x2_f32", "f32_16x16x4_f32", "f32_16x16x8_xf32", "f32_32x32x4_xf32", "f32_32x32x4_2b_f16",
          "f32_16x16x4_4b_f16", "f32_4x4x4_16b_f16", "f32_32x32x8_f16", "f32_16x16x16_f16", "f32_32x32x4_2b_bf16",
          "f32_16x16x4_4b_bf16", "f32_4x4x4_16b_bf16", "f32_32x32x8_bf16", "f32_16x16x16_bf16"] + [
    f"f32_{s}_{a}_{b}" for s in ("16x16x32", "32x32x16") for a in ("bf8", "fp8") for b in ("bf8", "fp8")]
MFMA_QUALIFIERS = {"CDNA1": _CDNA1, "CDNA2": _CDNA2 + _CDNA1, "CDNA3": _CDNA3}


def _amd_types(q: str) -> tuple[str, str, str, str]:
    """(d, shape, a, b) of an AMD mfma suffix (v_mfma_<suffix>)."""
    parts = q.split("_")
    d = parts[0]
    if len(parts) == 2 or (len(parts) == 3 and parts[2] == "1k"):
        st = parts[1]
        t = "bf16" if st.endswith("bf16") else st[-3:]
        return d, st[: -len(t)], t, t
    if len(parts) == 3:
        return d, parts[1], parts[2], parts[2]
    if parts[-1] in ("fp8", "bf8"):
        return d, parts[1], parts[2], parts[3]
    return d, parts[1], parts[3], parts[3]


def _amd_mfma(arch: str, q: str) -> Instruction:
    d, shape, a, b = _amd_types(q)
    m, n, k = (int(v) for v in shape.split("x"))
    fa, fb, fd = AMD_FORMATS[a], AMD_FORMATS[b], AMD_FORMATS[d]
    alg: _Algorithm
    if fa in ("float64", "float32"):
        alg = FMAChain()
    elif fa in ("float8_e4m3fnuz", "float8_e5m2fnuz"):
        alg = TwoStageFusedDot(24, 31, 16, interleave=2, addend_below_window="zero")
    elif arch == "CDNA1":
        alg = ExactFusedDot(4 if fa == "float16" else 2)
    elif arch == "CDNA2":
        alg = FlushedMulAdd(2 if fa == "bfloat16" and not q.endswith("_1k") else 4)
    else:
        alg = TwoStageFusedDot(24, 31, 4 if fa == "tf32" else 8)
    return Instruction(arch, "mfma", q, m, n, k, fa, fb, fd, fd, alg)


@lru_cache(maxsize=1)
def _table() -> dict[tuple[str, str, str], Instruction]:
    out: dict[tuple[str, str, str], Instruction] = {}
    for arch, qs in MMA_QUALIFIERS.items():
        for q in qs:
            out[(arch, "mma", q)] = _nv_mma(arch, q)
    for q in _BS120:
        out[("RTX Blackwell", "mma.block_scale", q)] = _nv_block_scale("RTX Blackwell", "mma.block_scale", q)
    for q in WGMMA_QUALIFIERS:
        out[("Hopper", "wgmma", q)] = _nv_wgmma(q)
    for q in TCGEN05_QUALIFIERS:
        out[("Blackwell", "tcgen05.mma", q)] = _nv_tcgen05(q)
    for q in TCGEN05_BS_QUALIFIERS:
        out[("Blackwell", "tcgen05.mma.block_scale", q)] = _nv_block_scale("Blackwell", "tcgen05.mma.block_scale", q)
    for arch, qs in MFMA_QUALIFIERS.items():
        for q in qs:
            out[(arch, "mfma", q)] = _amd_mfma(arch, q)
    return out


def instructions(arch: str | None = None, instruction: str | None = None) -> list[Instruction]:
    """Every modelled instruction (optionally of one arch and/or instruction kind), in table order."""
    if arch is not None and arch not in ARCHS:
        raise unknown_name("architecture", arch, ARCHS)
    if instruction is not None and instruction not in KINDS:
        raise unknown_name("instruction", instruction, KINDS)
    return [v for (a, i, _), v in _table().items() if (arch is None or a == arch)
            and (instruction is None or i == instruction)]


def get(arch: str, instruction: str, qualifier: str) -> Instruction:
    """The model of one instruction: ``get("Hopper", "wgmma", "m64n8k32.f32.e4m3.e4m3")`` (mma.md §4)."""
    if arch not in ARCHS:
        raise unknown_name("architecture", arch, ARCHS)
    if instruction not in KINDS:
        raise unknown_name("instruction", instruction, KINDS)
    t = _table()
    key = (arch, instruction, qualifier)
    if key not in t:
        known = [q for (a, i, q) in t if a == arch and i == instruction]
        if not known:
            kinds = sorted({i for (a, i, _) in t if a == arch})
            raise QrefError(f"{arch} has no {instruction!r} instruction; it has {', '.join(kinds)}")
        raise unknown_name(f"{arch} {instruction} qualifier", qualifier, known)
    return t[key]


def custom(name: str, m: int, n: int, k: int, a_format: str, b_format: str, c_format: str, d_format: str,
           arithmetic: _Algorithm, scale_format: str | None = None, block_size: int | None = None) -> Instruction:
    """A user-defined matrix unit (mma.md §6): the same records with your parameters, e.g. an NPU's dot unit."""
    for nm, f in (("a_format", a_format), ("b_format", b_format), ("c_format", c_format), ("d_format", d_format)):
        if f not in OPERAND_FORMATS:
            raise unknown_name(f"{nm}", f, OPERAND_FORMATS)
    if d_format not in ("float32", "float16", "float64"):
        raise QrefError(f"{name}: d_format must be float32, float16 or float64, got {d_format!r}")
    if arithmetic.scaled != (scale_format is not None):
        raise QrefError(f"{name}: {arithmetic.family} {'needs' if arithmetic.scaled else 'takes no'} scale_format")
    return Instruction("custom", "custom", name, m, n, k, a_format, b_format, c_format, d_format, arithmetic,
                       scale_format, block_size, source="user-defined", status="spec", evidence=())


__all__ = ["AMD_FORMATS", "ARCHS", "KINDS", "MFMA_QUALIFIERS", "MMA_QUALIFIERS", "PTX_FORMATS",
           "TCGEN05_BS_QUALIFIERS", "TCGEN05_QUALIFIERS", "WGMMA_QUALIFIERS", "Instruction", "custom", "get",
           "instructions"]

"""Temporary uniform cases for the harness tests (the committed suite has no uniform family yet).

Built like a family builder would: scheme -> qref's quantize/dequantize for the expected outputs, and
``profiles`` = every registered uniform profile under which the outputs and the unspecified mask are the same.
Not a test module (imported by tests/test_harness*.py).
"""

from __future__ import annotations

import numpy as np

import qref
from qref.conformance import Case
from qref.formats import IntFormat, get_format
from qref.profiles import profiles
from qref.schemes.base import QArray

F32 = np.float32


def ties(s: float, ks: range = range(-140, 141)) -> np.ndarray:
    b = ((np.asarray(ks, dtype=np.float64) + 0.5) * s).astype(F32)
    return np.concatenate([b, np.nextafter(b, F32(np.inf)), np.nextafter(b, F32(-np.inf))]).astype(F32)


SPECIALS = np.array([np.inf, -np.inf, 1e30, -1e30, 1e-45, -0.0, 0.0, np.nan], dtype=F32)


def _codes_record(codes: np.ndarray, storage: str) -> tuple[np.ndarray, str | None]:
    fmt = get_format(storage)
    if not isinstance(fmt, IntFormat):
        return np.asarray(codes).astype(np.uint8), fmt.name
    width = 1 if fmt.bits <= 8 else (2 if fmt.bits <= 16 else 4)
    u = np.asarray(codes).astype(np.int64) & ((1 << fmt.bits) - 1)
    return u.astype(f"u{width}"), fmt.name


def _holds(storage: str, kw: dict, op: str, inp: np.ndarray, exp: np.ndarray, mask: np.ndarray) -> list[str]:
    out = []
    for name in profiles("uniform"):
        try:
            sch = qref.scheme(storage, profile=name, **kw)
            if op == "uniform_quantize":
                q = sch.quantize(inp)
                got, m = _codes_record(q.codes, storage)[0], np.asarray(q.unspecified)
            else:
                codes = _signed(inp, storage)
                got, m = sch.dequantize_with_mask(QArray(codes=codes, scheme=sch), dtype=exp.dtype)
        except qref.QrefError:
            continue
        if np.array_equal(np.asarray(m), mask) and np.array_equal(
                np.where(mask, 0, np.asarray(got).view(f"u{exp.dtype.itemsize}")),
                np.where(mask, 0, exp.view(f"u{exp.dtype.itemsize}"))):
            out.append(name)
    return out


def _signed(codes: np.ndarray, storage: str) -> np.ndarray:
    fmt = get_format(storage)
    v = np.asarray(codes).astype(np.int64)
    if isinstance(fmt, IntFormat) and fmt.signed:
        v = np.where(v >= 1 << (fmt.bits - 1), v - (1 << fmt.bits), v)
    return v


def quantize_case(cid: str, storage: str, x: np.ndarray, profile: str = "stablehlo", **kw: object) -> Case:
    sch = qref.scheme(storage, profile=profile, **kw)
    q = sch.quantize(x)
    codes, fmt = _codes_record(q.codes, storage)
    mask = np.asarray(q.unspecified, dtype=bool)
    return Case(id=f"uniform/{cid}", family="uniform", operation="uniform_quantize", scheme=sch, profile=profile,
                inputs={"x": x}, expected={"codes": codes}, unspecified={"codes": mask},
                array_formats={"codes": fmt} if fmt else {}, tags=("tie",), spec=("uniform.md §2.1",),
                profiles=tuple(_holds(storage, dict(kw), "uniform_quantize", x, codes, mask)))


def dequantize_case(cid: str, storage: str, codes: np.ndarray, profile: str = "stablehlo", **kw: object) -> Case:
    sch = qref.scheme(storage, profile=profile, **kw)
    rec, fmt = _codes_record(codes, storage)
    y, mask = sch.dequantize_with_mask(QArray(codes=_signed(rec, storage), scheme=sch), dtype=np.float32)
    return Case(id=f"uniform/{cid}", family="uniform", operation="uniform_dequantize", scheme=sch,
                profile=profile, inputs={"codes": rec}, expected={"y": np.asarray(y)},
                unspecified={"y": np.asarray(mask, dtype=bool)}, array_formats={"codes": fmt} if fmt else {},
                spec=("uniform.md §2.2",),
                profiles=tuple(_holds(storage, dict(kw), "uniform_dequantize", rec, np.asarray(y), mask)))


def uniform_cases() -> list[Case]:
    cases = []
    for s, z in ((0.5, -3), (0.1, 3), (1 / 3, 0)):
        x = np.concatenate([ties(s), SPECIALS]).astype(F32)
        for prof in ("stablehlo", "onnx", "mlir", "stablehlo_lowering"):
            cases.append(quantize_case(f"int8/s{s:.4f}_z{z}/{prof}/ties", "int8", x, prof, scale=s, zero_point=z))
    x = np.concatenate([ties(0.25, range(-20, 21)), SPECIALS]).astype(F32)
    for storage, z in (("uint8", 7), ("int16", 3), ("int4", -1), ("uint4", 2)):
        for prof in ("stablehlo", "onnx", "mlir"):
            cases.append(quantize_case(f"{storage}/s0.25_z{z}/{prof}/ties", storage, x, prof, scale=0.25,
                                       zero_point=z))
    rng = np.random.default_rng(3)
    xa = (rng.integers(-600, 600, size=(4, 3)) / 8).astype(F32)
    for prof in ("stablehlo", "onnx", "mlir"):
        cases.append(quantize_case(f"int8/per_axis/{prof}/grid", "int8", xa, prof, scale=[0.1, 0.5, 1 / 3],
                                   zero_point=[-3, 0, 3], axis=1))
    xb = (rng.integers(-600, 600, size=(2, 6)) / 8).astype(F32)
    cases.append(quantize_case("int8/blocked/onnx/grid", "int8", xb, "onnx", scale=np.array([[0.1, 0.5], [0.25, 1.0]]),
                               zero_point=np.array([[1, -2], [0, 3]]), axis=1, block_size=3))
    xf = np.array([1.0, 500.0, -500.0, 1e9, np.inf, -np.inf, 0.3, 3.3], dtype=F32)
    for sat in (True, False):
        cases.append(quantize_case(f"float8_e4m3fn/sat{int(sat)}/onnx/overflow", "float8_e4m3fn", xf, "onnx",
                                   scale=0.5, float_saturate=sat))
    for storage, z in (("int8", -1), ("uint8", 3), ("int4", 2)):
        fmt = get_format(storage)
        codes = np.arange(fmt.lo, fmt.hi + 1)
        for prof in ("stablehlo", "onnx", "mlir", "stablehlo_lowering"):
            cases.append(dequantize_case(f"{storage}/s0.1_z{z}/{prof}/all_codes", storage, codes, prof, scale=0.1,
                                         zero_point=z))
    return cases

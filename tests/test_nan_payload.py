"""NaN payloads (CastPolicy.nan_payload, decode's nan_payload; elements.md §2.7, §4).

Expected codes come from the IEEE bit rule written here independently of qref (``_rule``) and from the real backends
(numpy / ml_dtypes astype, JAX on XLA:CPU), never from qref. Inputs: every NaN of the 16-bit sources and of the
float8 formats, float32 / float64 NaNs with one payload bit at each position (alone and with the quiet bit) and
random payloads, both signs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import qref
from qref.core.decode import decode
from qref.core.encode import encode_exact, top16_jam_eligible, top16_table_eligible
from qref.core.exact import decompose
from qref.errors import QrefError

# IEEE layouts: (exponent bits, mantissa bits, unsigned view, dtype)
L = {"float64": (11, 52, np.uint64, np.float64), "float32": (8, 23, np.uint32, np.float32),
     "float16": (5, 10, np.uint16, np.float16), "bfloat16": (8, 7, np.uint16, ml_dtypes.bfloat16),
     "float8_e5m2": (5, 2, np.uint8, ml_dtypes.float8_e5m2), "float8_e4m3": (4, 3, np.uint8, ml_dtypes.float8_e4m3),
     "float8_e3m4": (3, 4, np.uint8, ml_dtypes.float8_e3m4)}
PAYLOADS = ("canonical", "keep_quiet", "keep_raw", "truncate")
NARROW = [("float32", "float16"), ("float32", "bfloat16"), ("float64", "float32"), ("float64", "float16"),
          ("float64", "bfloat16"), ("float16", "float8_e5m2"), ("bfloat16", "float8_e5m2"),
          ("float32", "float8_e5m2"), ("float64", "float8_e5m2"), ("float16", "float8_e4m3"),
          ("float32", "float8_e4m3"), ("float32", "float8_e3m4"), ("float64", "float8_e3m4"),
          ("bfloat16", "float16"), ("float16", "bfloat16")]
WIDE = [("float16", "float32"), ("bfloat16", "float32"), ("float16", "float64"), ("float32", "float64"),
        ("bfloat16", "float64"), ("float8_e5m2", "float32"), ("float8_e5m2", "float16"), ("float8_e4m3", "float32"),
        ("float8_e3m4", "float64")]


def _nan_bits(src: str, nrand: int = 20000) -> np.ndarray:
    """Every NaN of a format of at most 16 bits; else one payload bit at each position, each with the quiet bit,
    and ``nrand`` random payloads; both signs."""
    e, m, u, _ = L[src]
    top = np.uint64(((1 << e) - 1) << m)
    if e + m + 1 <= 16:
        f = np.arange(1, 1 << m, dtype=np.uint64)
    else:
        one = np.uint64(1) << np.arange(m, dtype=np.uint64)
        rng = np.random.default_rng(7)
        f = np.unique(np.concatenate([one, one | np.uint64(1 << (m - 1)),
                                      rng.integers(1, 1 << m, nrand, dtype=np.uint64)]))
    sign = np.uint64(1 << (e + m))
    return np.concatenate([top | f, sign | top | f]).astype(u)


def _rule(bits: np.ndarray, src: str, dst: str, payload: str) -> np.ndarray:
    """The NaN codes of dst for NaN bits of src: the payload P = the source fraction's top bits (shifted up into a
    wider fraction); canonical: quiet bit only; keep_quiet: P | quiet bit; keep_raw: P, 1 for P = 0; truncate: P."""
    es, ms, _, _ = L[src]
    ed, md, ud, _ = L[dst]
    b = bits.astype(np.uint64)
    s = (b >> np.uint64(es + ms)) & np.uint64(1)
    f = b & np.uint64((1 << ms) - 1)
    p = f >> np.uint64(ms - md) if md <= ms else f << np.uint64(md - ms)
    q = np.uint64(1 << (md - 1))
    frac = {"canonical": np.full_like(p, q), "keep_quiet": p | q,
            "keep_raw": np.where(p == 0, np.uint64(1), p), "truncate": p}[payload]
    return ((s << np.uint64(ed + md)) | np.uint64(((1 << ed) - 1) << md) | frac).astype(ud)


def _x(src: str) -> tuple[np.ndarray, np.ndarray]:
    bits = _nan_bits(src)
    return bits, bits.view(L[src][3])


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize(("src", "dst"), NARROW + [w for w in WIDE if not w[0].startswith("float8")])
def test_encode_follows_the_bit_rule(src: str, dst: str, payload: str) -> None:
    bits, x = _x(src)
    got = qref.encode(x, dst, profile=qref.CastPolicy(nan_payload=payload))
    np.testing.assert_array_equal(got, _rule(bits, src, dst, payload).astype(got.dtype))


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("overflow", ["inf", "saturate"])
@pytest.mark.parametrize("source", ["via_float32", "via_float16"])
@pytest.mark.parametrize(("src", "dst"), [("float64", "float16"), ("float64", "float8_e5m2"),
                                          ("float32", "float8_e4m3"), ("float32", "float16"),
                                          ("bfloat16", "float8_e5m2")])
def test_intermediate_rounding_keeps_the_payload(src: str, dst: str, source: str, overflow: str, payload: str
                                                 ) -> None:
    """source='via_float32' / 'via_float16' (elements.md §2.12): the payload rule acts from the input to the
    target, so the code is the one of the direct rule (a truncating target's Inf is not an intermediate Inf that
    the overflow policy would saturate)."""
    bits, x = _x(src)
    got = qref.encode(x, dst, profile=qref.CastPolicy(source=source, overflow=overflow, nan_payload=payload))
    np.testing.assert_array_equal(got, _rule(bits, src, dst, payload).astype(got.dtype))


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize(("src", "dst"), WIDE)
def test_decode_follows_the_bit_rule(src: str, dst: str, payload: str) -> None:
    bits, _ = _x(src)
    got = decode(bits, src, dtype=L[dst][3], nan_payload=payload).view(L[dst][2])
    np.testing.assert_array_equal(got, _rule(bits, src, dst, payload))


@pytest.mark.parametrize("payload", PAYLOADS[1:])
@pytest.mark.parametrize(("src", "dst"), [("float32", "float8_e5m2"), ("float32", "float8_e4m3"),
                                          ("float32", "float8_e3m4"), ("float64", "float8_e5m2"),
                                          ("float64", "float8_e4m3")])
def test_table_paths_equal_the_reference_path(src: str, dst: str, payload: str) -> None:
    """The top-16-bit tables (elements.md §2.10) give the reference path's codes: the payload bits a target of at
    most 6 mantissa bits keeps lie in the top 16 source bits, and a payload below them is the sticky bit."""
    fmt = qref.get_format(dst)
    rp = qref.CastPolicy(nan_payload=payload).resolve(fmt)
    assert top16_table_eligible(fmt, rp, src)
    _, x = _x(src)
    # the NaN patterns whose payload lies only in the low bits (the sticky bit of the tables), and +-Inf
    e, m, u, dt = L[src]
    top = ((1 << e) - 1) << m
    low = np.array([top | 1, top | 0xFFFF, top, (1 << (e + m)) | top | 1], dtype=u)
    x = np.concatenate([x, low.view(dt)])
    ref = encode_exact(decompose(x), fmt, rp)
    np.testing.assert_array_equal(qref.encode(x, fmt, profile=rp.policy), ref)  # > 64 elements: the table path
    # both table paths are covered: the jam table (float32 sources, E5M2 from float64) and the 2 x 65536 table
    assert top16_jam_eligible(fmt, rp, src) == (src == "float32" or dst == "float8_e5m2")


@pytest.mark.parametrize("payload", PAYLOADS[1:])
@pytest.mark.parametrize(("src", "dst"), [("float16", "float8_e5m2"), ("bfloat16", "float8_e4m3"),
                                          ("float16", "bfloat16"), ("bfloat16", "float16")])
def test_16bit_table_equals_the_reference_path(src: str, dst: str, payload: str) -> None:
    fmt = qref.get_format(dst)
    rp = qref.CastPolicy(nan_payload=payload).resolve(fmt)
    x = np.arange(1 << 16, dtype=np.uint16).view(L[src][3])
    np.testing.assert_array_equal(qref.encode(x, fmt, profile=rp.policy), encode_exact(decompose(x), fmt, rp))


def test_single_nan_code_targets_and_nan_without_payload_are_unchanged() -> None:
    x = np.array([0x7FA00000, 0xFF800001, 0x7FC00000], dtype=np.uint32).view(np.float32)
    for name in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e8m0fnu"):
        for p in PAYLOADS[1:]:
            np.testing.assert_array_equal(qref.encode(x, name, profile=qref.CastPolicy(nan_payload=p)),
                                          qref.encode(x, name))
    # the FNUZ NaN 0x80 has no payload bits: the canonical NaN (-NaN, elements.md §4) under every policy
    for p in PAYLOADS:
        assert decode(np.array([0x80], np.uint8), "float8_e4m3fnuz", nan_payload=p).view(np.uint32)[0] == 0xFFC00000
    # E4M3FN's NaN 0x7F / 0xFF carries fraction 111 (torch's decode keeps it: 0x7FF00000)
    got = decode(np.array([0x7F, 0xFF], np.uint8), "float8_e4m3fn", nan_payload="keep_quiet").view(np.uint32)
    assert got.tolist() == [0x7FF00000, 0xFFF00000]


def test_payload_applies_to_nan_inputs_only() -> None:
    """Overflow to NaN and Inf under overflow='nan' give the canonical NaN; 'positive' drops the sign only."""
    pol = qref.CastPolicy(overflow="nan", nan_payload="keep_raw")
    x = np.array([np.inf, -1e6, 0x7F800001], dtype=np.float32)
    x[2] = np.array([0x7F800001], np.uint32).view(np.float32)[0]
    assert qref.encode(x, "float8_e5m2", profile=pol).tolist() == [0x7E, 0xFE, 0x7D]
    neg = np.array([0xFFA00000], np.uint32).view(np.float32)
    assert qref.encode(neg, "float16", profile=qref.CastPolicy(nan="positive", nan_payload="keep_quiet")) == 0x7F00


def test_invalid_combinations_raise() -> None:
    with pytest.raises(QrefError, match="NaN payload policy"):
        qref.CastPolicy(nan_payload="keep")
    with pytest.raises(QrefError, match="nan_code"):
        qref.CastPolicy(nan_code="all_ones", nan_payload="keep_quiet")
    with pytest.raises(QrefError, match="integer storage"):
        qref.CastPolicy(nan_payload="keep_quiet").resolve(qref.get_format("int8"))
    with pytest.raises(QrefError, match="nan_payload"):
        decode(np.array([0x7D], np.uint8), "float8_e5m2", nan_payload="quiet")


def test_default_stays_canonical() -> None:
    """The default is today's rule: every NaN input gives the canonical quiet NaN of its sign."""
    for src, dst in NARROW + [w for w in WIDE if not w[0].startswith("float8")]:
        bits, x = _x(src)
        got = qref.encode(x, dst)
        np.testing.assert_array_equal(got, _rule(bits, src, dst, "canonical").astype(got.dtype))


# ---- the real backends ------------------------------------------------------------------------------------------
def _np_astype(x: np.ndarray, dst: str) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return x.astype(L[dst][3])


# numpy / ml_dtypes astype, measured: numpy's float -> half keeps the truncated payload (a zero one becomes 1:
# npy_floatbits_to_halfbits); double -> float is the hardware's cvtsd2ss (quieted); half -> float and bfloat16 ->
# float are bit shifts; ml_dtypes' other casts go through float32 and write the canonical NaN
ASTYPE = {("float32", "float16"): "keep_raw", ("float64", "float16"): "keep_raw", ("float64", "float32"): "keep_quiet",
          ("float16", "float32"): "keep_raw", ("bfloat16", "float32"): "keep_raw",
          ("float16", "float64"): "keep_raw", ("float32", "float64"): "keep_quiet",
          ("bfloat16", "float64"): "keep_quiet"}


@pytest.mark.parametrize(("src", "dst"), NARROW + WIDE)
def test_numpy_astype_payload_rule(src: str, dst: str) -> None:
    """The rule each numpy / ml_dtypes astype follows (the mechanism exists for every one of them)."""
    bits, x = _x(src)
    got = _np_astype(x, dst).view(L[dst][2])
    np.testing.assert_array_equal(got, _rule(bits, src, dst, ASTYPE.get((src, dst), "canonical")))


# JAX 0.10.2 on XLA:CPU under the harness's pin (XLA_FLAGS=--xla_cpu_max_isa=AVX2; the process may run natively:
# float64 -> float16 is excluded, natively it keeps the payload), against the jax element profile
JAX_ENCODE = [p for p in NARROW if p != ("float64", "float16")] + [w for w in WIDE if not w[0].startswith("float8")]


@pytest.fixture
def jax_x64():
    """jax with jax_enable_x64 on for the test (float64 inputs stay float64), restored afterwards: other tests in
    the process model JAX's default (float64 rounded to float32 on entry)."""
    jax = pytest.importorskip("jax", reason="jax is not installed")
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield jax
    finally:
        jax.config.update("jax_enable_x64", old)


@pytest.mark.parametrize(("src", "dst"), JAX_ENCODE)
def test_jax_profile_reproduces_astype(src: str, dst: str, jax_x64) -> None:
    jnp = jax_x64.numpy
    bits, x = _x(src)
    got = np.asarray(jnp.asarray(x).astype(L[dst][3])).view(L[dst][2])
    if src in ("float16", "bfloat16") and dst == "float8_e5m2":  # +NaN 0x7F for every NaN
        np.testing.assert_array_equal(got, np.full(bits.shape, 0x7F, np.uint8))
    np.testing.assert_array_equal(qref.encode(x, dst, profile="jax").astype(got.dtype), got)


@pytest.mark.parametrize(("src", "dst"), WIDE)
def test_jax_profile_reproduces_decode(src: str, dst: str, jax_x64) -> None:
    from qref.harness.families.elements import decode_payload

    jnp = jax_x64.numpy
    bits, x = _x(src)
    got = np.asarray(jnp.asarray(x).astype(L[dst][3])).view(L[dst][2])
    payload = decode_payload("jax", qref.get_format(src), np.dtype(L[dst][3]))
    np.testing.assert_array_equal(decode(bits, src, dtype=L[dst][3], nan_payload=payload).view(L[dst][2]), got)


# ---- the harness targets of the other backends, against their element profiles ----------------------------------
# (backend, target, the casts whose NaNs the target's profile models; "decode:F:D" = decode of F codes to D). Left out
# (xfail entries): openvino.convert.constant f16 -> E5M2 (truncate where the plugin quiets), onnxruntime f32 -> f16
# (vectorized part vs scalar tail), torch's decode into bfloat16 (+NaN 0x7FC0), mlir's float8 types (not lowered).
TARGETS = [
    ("stablehlo", "stablehlo.convert", [*((s, d) for d in ("float16", "bfloat16", "float8_e5m2", "float8_e4m3",
                                                          "float8_e3m4") for s in ("float32", "float64", "float16",
                                                                                   "bfloat16") if s != d),
                                        *(f"decode:{f}:float32" for f in ("float16", "bfloat16", "float8_e5m2",
                                                                          "float8_e4m3", "float8_e3m4"))]),
    ("mlir", "mlir.arith", [("float32", "float16"), ("float64", "float16"), ("float32", "bfloat16"),
                            "decode:float16:float32", "decode:bfloat16:float32"]),
    ("onnxruntime", "onnxruntime.cast.nosaturate", [("float32", "float8_e5m2"), ("float16", "float8_e5m2"),
                                                    ("bfloat16", "float8_e5m2"), "decode:float16:float32",
                                                    "decode:bfloat16:float32"]),
    ("openvino", "openvino.convert.parameter", [("float32", "float8_e5m2"), ("float64", "float8_e5m2"),
                                                ("float16", "float8_e5m2"), ("bfloat16", "float8_e5m2"),
                                                *(f"decode:float8_e5m2:{d}" for d in ("float32", "float16",
                                                                                      "bfloat16"))]),
    ("openvino", "openvino.convert.constant", [("float32", "float8_e5m2"), ("bfloat16", "float8_e5m2")]),
    ("torch", "torch.to", [("float32", "float8_e5m2"), ("float16", "float8_e5m2"),
                           *(f"decode:{f}:{d}" for f in ("float8_e5m2", "float8_e4m3fn")
                             for d in ("float32", "float64", "float16"))]),
    ("ml_dtypes", "ml_dtypes.astype", ["decode:bfloat16:float32"]),
    ("iree", "iree.arith", [("float32", "float16"), ("float64", "float16"), ("float32", "bfloat16"),
                            ("float64", "bfloat16"), *((s, d) for d in ("float8_e5m2", "float8_e4m3", "float8_e3m4")
                                                       for s in ("float32", "bfloat16")),
                            "decode:bfloat16:float32", "decode:float16:float32"]),
]
_SRC_KEY = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}
_MODULE = {"iree": "iree.compiler", "stablehlo": "torch_mlir", "mlir": "torch_mlir", "onnxruntime": "onnxruntime",
           "openvino": "openvino",
           "torch": "torch", "ml_dtypes": "ml_dtypes"}


def _probe_case(cast: tuple[str, str] | str):
    from qref.conformance.case import Case

    if isinstance(cast, str):
        _, f, d = cast.split(":")
        fmt = qref.get_format(f)
        codes = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)
        dt = np.dtype(ml_dtypes.bfloat16) if d == "bfloat16" else np.dtype(d)
        return Case(id=f"elements/{f}/decode/{d}", family="elements", operation="decode", format=fmt,
                    params={"dtype": d}, inputs={"codes": codes}, expected={"y": decode(codes, fmt, dtype=dt)},
                    array_formats={"codes": f})
    src, dst = cast
    fmt = qref.get_format(dst)
    x = _nan_bits(src, nrand=2000).view(L[src][3])
    return Case(id=f"elements/{dst}/{_SRC_KEY[src]}/nearest_even/inf/nan_payload", family="elements",
                operation="encode", format=fmt, params={"rounding": "nearest_even"}, inputs={"x": x},
                expected={"codes": qref.encode(x, fmt)}, policy=qref.CastPolicy())


@pytest.mark.parametrize(("backend", "target", "casts"), TARGETS, ids=[t[1] for t in TARGETS])
def test_target_profile_reproduces_the_backend_nans(backend: str, target: str, casts: list) -> None:
    """The backend's output on every NaN input (expected) equals qref's prediction under the target's profile,
    under the harness's CPU pin (profiles.md §6: a pinned backend runs in a fresh process with the pin's
    environment; openvino's plugin quiets E5M2 payloads natively on AVX-512, the cpu variant
    openvino_f8e5m2_nan_payload)."""
    pytest.importorskip(_MODULE[backend], reason=f"{backend} is not installed")
    from qref.profiles.cpu import PINS

    pin = PINS.get(backend)
    if pin is None or not pin.env:
        _check_target(backend, target, casts)
        return
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_nan_payload as t; "
            f"t._check_target({backend!r}, {target!r}, {casts!r})")
    env = {**os.environ, **dict(pin.env)}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]


def _check_target(backend: str, target: str, casts: list) -> None:
    from qref.harness.adapters import load_targets
    from qref.harness.families.elements import expectation

    tgt = {t.name: t for t in load_targets(backend)}[target]
    for cast in casts:
        case = _probe_case(cast)
        assert tgt.supports(case) is None, (cast, tgt.supports(case))
        (out,) = tgt.run([case])
        assert not isinstance(out, BaseException), (cast, out)
        (name,) = case.expected
        got = np.asarray(out[name])
        want = np.asarray(expectation(case, tgt.reference).outputs[name])
        u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
        assert np.array_equal(got.astype(want.dtype).view(u) if name == "codes" else got.view(u), want.view(u)), cast

"""The qwix block mechanisms (block.md §3.3, §4.2, §4.5, §5.2) against an oracle written here from the documented
steps with numpy / ml_dtypes scalar arithmetic (float16 and bfloat16 operations as numpy and ml_dtypes do them:
in float32, rounded to the dtype), and worked examples derived by hand in the spec. These run without qwix;
tests/test_block_qwix.py checks the same profile against the installed qwix.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import qref

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


def oracle_exponent(amax: float, T: np.dtype, M: float) -> int:
    """e of rceil_log2_via_ln_in_dtype with quotient_arith='reciprocal' and tiny_quotient (block.md §3.3, §4.2):
    r = fl_T(amax * fl_K(1/M)); r < sqrt(min normal) -> 1; e = ceil(fl_T(fl_T(ln r) * fl_K(1 / fl_T(ln 2))))."""
    K = F16 if T == F16 else F32
    a = np.array(amax, dtype=T)
    c = np.array(1.0 / M, dtype=K)
    r = np.array(np.float32(a.astype(np.float32)) * np.float32(c), dtype=np.float32).astype(T)
    tiny = 2.0 ** -14 if T == F16 else 2.0 ** -126
    if float(r) < math.sqrt(tiny):
        r = np.array(1.0, dtype=T)
    ln = np.float32(math.log(float(r))).astype(T)
    inv = np.array(1.0 / float(np.array(math.log(2.0), dtype=T)), dtype=K)
    q = np.array(np.float32(ln.astype(np.float32)) * np.float32(inv), dtype=np.float32).astype(T)
    return math.ceil(float(q))


@pytest.mark.parametrize("T", [F32, F16, BF16], ids=lambda d: d.name)
@pytest.mark.parametrize("name,M", [("mxfp8_e4m3", 448.0), ("mxfp4", 6.0)])
def test_scale_rule_against_the_oracle(name: str, M: float, T: np.dtype) -> None:
    rng = np.random.default_rng(5)
    hi = math.log2(float(ml_dtypes.finfo(T).max))
    amax = np.exp2(rng.uniform(-80 if T != F16 else -24, hi, 3000))
    # next to M * 2^k, the rounding boundaries of the rule
    k = rng.integers(-60 if T != F16 else -20, 8, 2000)
    edge = (M * np.exp2(k) * (1 + rng.choice([-2, -1, 0, 1, 2], 2000) * float(ml_dtypes.finfo(T).eps)))
    amax = np.concatenate([amax, edge, [0.0]]).astype(np.float32).astype(T)
    if T == F16:  # every positive finite float16
        amax = np.concatenate([amax, np.arange(1, 0x7C00, dtype=np.uint16).view(F16)])
    amax = amax[np.isfinite(amax.astype(np.float64))]
    s = qref.scheme(name, profile="qwix")
    x = np.zeros((amax.size, 32), dtype=T)
    x[:, 7] = amax
    got = np.asarray(s.quantize(x).scales).reshape(-1).astype(np.int64) - 127
    want = np.array([oracle_exponent(float(a), T, M) for a in amax.astype(np.float64)])
    assert (got == want).all(), [(float(a), int(g), int(w)) for a, g, w in zip(amax, got, want) if g != w][:5]


def test_worked_examples() -> None:
    """block.md §4.2's examples: float16 amax 7.00390625 under mxfp8: r = fl16(7.00390625 * fl16(1/448)) = 2^-6
    (fl16(1/448) = 1170 * 2^-19), ln r -> -4.16015625, times fl16(1 / 0.693359375) = 1.4423828125 -> -6.0: byte
    121 (dividing by 448 gives r = 0.01564026 and byte 122). float32 amax 448 * 2^-64: r = 2^-64 < 2^-63 -> scale
    1 (byte 127) and the element underflows to code 0 (rceil without tiny_quotient: byte 63, code 0x7E).
    A zero block: byte 127."""
    s = qref.scheme("mxfp8_e4m3", profile="qwix")
    x = np.zeros((1, 32), dtype=np.float16)
    x[0, 0] = 7.00390625
    assert int(s.quantize(x).scales.reshape(-1)[0]) == 121
    assert int(qref.scheme("mxfp8_e4m3", profile="qwix", quotient_arith="divide").quantize(x).scales.reshape(-1)[0]) \
        == 122
    x = np.zeros((2, 32), dtype=np.float32)
    x[0, 0] = 448.0 * 2.0 ** -64
    q = s.quantize(x)
    assert q.scales.reshape(-1).tolist() == [127, 127] and int(q.codes[0, 0]) == 0
    q = qref.scheme("mxfp8_e4m3", profile="qwix", tiny_quotient="keep").quantize(x)
    assert int(q.scales.reshape(-1)[0]) == 63 and int(q.codes[0, 0]) == 0x7E


def test_nonfinite_blocks() -> None:
    """nonfinite_divisor (§4.5): byte 255; an Inf block's elements are x / Inf (+-0, Inf / Inf = NaN), a NaN
    block's all NaN (unspecified codes: the NaN's sign); float32 NaN blocks are unspecified (nan_block_float32).
    nvfp4 input_dtype_clip (§5.2): an Inf block gets s = clip(Inf, -448, 448) = 448 (byte 0x7E) and Inf -> 6."""
    x = np.tile(np.linspace(-3, 3, 32, dtype=np.float32), (2, 1)).astype(np.float16)
    x[0, 3] = np.inf
    x[1, 3] = np.nan
    q = qref.scheme("mxfp8_e4m3", profile="qwix").quantize(x)
    assert q.scales.reshape(-1).tolist() == [255, 255]
    assert set(q.codes[0, :3].tolist()) == {0x80} and set(q.codes[0, 20:].tolist()) == {0x00}
    assert q.unspecified[0].tolist() == [i == 3 for i in range(32)] and q.unspecified[1].all()
    assert not np.asarray(q.meta["scales_unspecified"]).any()
    q32 = qref.scheme("mxfp8_e4m3", profile="qwix").quantize(x.astype(np.float32))
    assert np.asarray(q32.meta["scales_unspecified"]).reshape(-1).tolist() == [False, True]
    n = qref.scheme("nvfp4", profile="qwix").quantize(x[:, :16])
    assert int(n.scales.reshape(-1)[0]) == 0x7E and int(n.codes[0, 3]) == 0x7


def test_dequantize_flushes_the_float32_subnormal_scale() -> None:
    """dequant in_dtype with flush_subnormals (§4.8): byte 0 (2^-127) reads as 0 in float32 and bfloat16; in
    float16 it rounds to 0 already; byte 142 (2^15) times E4M3 448 overflows float16 to Inf."""
    s = qref.scheme("mxfp8_e4m3", profile="qwix")
    codes = np.full((2, 32), 0x7E, dtype=np.uint8)  # 448
    q = qref.QArray(codes=codes, scheme=s, scales=np.array([[0], [142]], dtype=np.uint8), axis=-1)
    y32 = np.asarray(s.dequantize(q, dtype=np.float32))
    assert (y32[0] == 0).all() and (y32[1] == 448.0 * 2.0**15).all()
    y16 = np.asarray(s.dequantize(q, dtype=np.float16))
    assert (y16[0] == 0).all() and np.isinf(y16[1]).all()


def test_new_fields_are_checked() -> None:
    with pytest.raises(qref.QrefError, match="floating-point arithmetic"):
        qref.scheme("mxfp4", profile="ocp", scale_rule="rceil", tiny_quotient="one_below_sqrt_min_normal")
    with pytest.raises(qref.QrefError, match="tiny_quotient"):
        qref.scheme("mxfp4", profile="mlx", scale_rule="floor", tiny_quotient="one_below_sqrt_min_normal")
    with pytest.raises(qref.QrefError, match="takes a floating-point logarithm"):
        qref.scheme("mxfp4", profile="ocp", scale_rule="rceil_log2_via_ln_in_dtype")
    with pytest.raises(qref.QrefError, match="floating-point arithmetic"):
        qref.scheme("mxfp4", profile="ocp", nonfinite_block="nonfinite_divisor")
    with pytest.raises(qref.QrefError, match="floating-point arithmetic"):
        qref.scheme("mxfp4", profile="ocp", nan_block_float32="unspecified")
    with pytest.raises(qref.QrefError, match="input_dtype_clip"):
        qref.scheme("nvfp4", profile="mlx", tiny_quotient="one_below_sqrt_min_normal")
    with pytest.raises(qref.QrefError, match="input dtype"):
        qref.scheme("nvfp4", profile="ocp", global_scale_rule="input_dtype_clip")
    with pytest.raises(qref.QrefError, match="takes no global scale"):
        qref.scheme("nvfp4", profile="qwix").quantize(np.ones((1, 16), np.float32), global_scale=1.0)
    with pytest.raises(qref.QrefError, match="tiny_quotient"):
        qref.scheme("mxfp4", profile="qwix", tiny_quotient="sqrt")
    # defaults stay out of the committed specs; a non-default value is recorded
    assert "tiny_quotient" not in qref.scheme("mxfp4", profile="mlx").to_spec()
    spec = qref.scheme("mxfp4", profile="qwix").to_spec()
    assert spec["tiny_quotient"] == "one_below_sqrt_min_normal" and spec["nan_block_float32"] == "unspecified"
    from qref.schemes.block.scheme import from_spec
    assert from_spec(spec).rules == qref.scheme("mxfp4", profile="qwix").rules

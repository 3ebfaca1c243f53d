"""The code of docs/testing-backends.md, run against real MLX and JAX on CPU.

Known differences from the spec (docs/testing-backends.md §6, checked with MLX 0.32.4 and JAX 0.10.2 on CPU):
MLX ``to_fp8`` saturates and maps NaN to +-448 (element profile "mlx"); MLX ``mx.quantize`` in mxfp4/mxfp8 mode
takes the scale 2^ceil(log2(amax / max)) and rounds FP4 ties toward zero (block profile "mlx"); JAX's E8M0 cast
rounds ties up (element profile "ml_dtypes"); XLA turns every float16 NaN into E5M2 0x7F and every NaN into -0
in float4_e2m1fn. The kit must find each of them, shrink it to a readable example, and pass against the
backend's own profile.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qref
import qref.testing.strategies as qs
from qref.testing import ConformanceError, assert_conforms, assert_values_equal

E4M3 = "float8_e4m3fn"


@pytest.fixture(scope="module")
def mx():
    return pytest.importorskip("mlx.core", reason="the MLX part of the tutorial needs mlx (pip install mlx[cpu])")


@pytest.fixture(scope="module")
def jnp():
    return pytest.importorskip("jax.numpy", reason="the JAX part of the tutorial needs jax (pip install jax)")


# ---- §5.1 MLX to_fp8: saturating, NaN -> +-448 -------------------------------------------------------------
def make_mlx_to_fp8(mx):
    def mlx_to_fp8(x: np.ndarray) -> np.ndarray:
        return np.array(mx.to_fp8(mx.array(x)))  # uint8 codes of float8_e4m3fn

    return mlx_to_fp8


def test_mlx_to_fp8_differs_from_the_spec(mx) -> None:
    mlx_to_fp8 = make_mlx_to_fp8(mx)
    with pytest.raises(ConformanceError) as info:
        assert_conforms(mlx_to_fp8, E4M3, profile="spec", seed=0)
    err = info.value
    # shrunk to one element: the first value above max on the E4M3 grid, 448 + 32; the spec (OCP OFP8,
    # non-saturating as ml_dtypes) gives NaN 0x7F, MLX saturates to 448 = 0x7E
    assert err.example.tolist() == [480.0]
    assert "saturate_vs_nan" in err.report
    assert err.reproducer.endswith("# [0x7f]; mlx_to_fp8(x) gives [0x7e]")


def test_mlx_to_fp8_inf_and_nan_differences(mx) -> None:
    # without finite overflow inputs the next differences are the specials: +Inf -> 448 (the spec: NaN, E4M3FN
    # has no Inf), then, without Inf, +NaN -> 448 where the spec keeps NaN
    fn = make_mlx_to_fp8(mx)
    with pytest.raises(ConformanceError) as info:
        assert_conforms(fn, E4M3, weights={"overflow": 0, "random": 0}, seed=0)
    assert info.value.example.view(np.uint32).tolist() == [0x7F800000]
    assert "saturate_vs_nan" in info.value.report
    with pytest.raises(ConformanceError) as info:
        assert_conforms(fn, E4M3, inputs=qs.arrays(E4M3, weights={"overflow": 0, "random": 0},
                                                   allow_infinity=False), seed=0)
    assert info.value.example.view(np.uint32).tolist() == [0x7FC00000]
    assert "nan_input" in info.value.report


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_mlx_to_fp8_conforms_to_its_profile(mx, dtype: str) -> None:
    # profile "mlx" = CastPolicy(overflow="saturate", nan="max")
    assert_conforms(make_mlx_to_fp8(mx), E4M3, profile="mlx", dtype=dtype, max_examples=300, seed=0)


def test_mlx_from_fp8_decodes_every_code(mx) -> None:
    @settings(max_examples=100, deadline=None, database=None)
    @given(qs.code_arrays(E4M3))
    def check(codes: np.ndarray) -> None:
        got = np.array(mx.from_fp8(mx.array(codes), dtype=mx.float32))
        # MLX writes NaN as 0x7FF00000 (the code's bits shifted), qref as the quiet NaN 0x7FC00000 with the
        # code's sign: the same NaN for every purpose but its payload
        assert_values_equal(got, qref.decode(codes, E4M3, dtype=np.float32), nan="same_sign", inputs=codes)

    check()
    nan_code = np.array([0x7F], dtype=np.uint8)
    with pytest.raises(AssertionError, match="nan_code"):
        assert_values_equal(np.array(mx.from_fp8(mx.array(nan_code), dtype=mx.float32)),
                            qref.decode(nan_code, E4M3, dtype=np.float32))


# ---- §5.2 MLX mx.quantize(mode="mxfp4"): element ties toward zero ------------------------------------------
def make_mlx_mxfp4_elements(mx):
    """Element codes of mx.quantize(mode="mxfp4") with the scale pinned to 1: every group is [6, x...], so
    amax = 6 = E2M1 max and the shared scale is 2^0 under any scale rule (OCP floor, MLX ceil of amax / 6)."""

    def mlx_mxfp4_elements(x: np.ndarray) -> np.ndarray:
        flat = x.reshape(-1)
        w = np.zeros((flat.size, 32), dtype=x.dtype)
        w[:, 0] = 6
        w[:, 1] = flat
        wq, scales = mx.quantize(mx.array(w), group_size=32, bits=4, mode="mxfp4")
        assert (np.array(scales) == 127).all()  # E8M0 byte 127: scale 1
        words = np.array(wq).view(np.uint32)
        nibbles = (words[..., None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF  # element 8j+k at bit 4k
        return nibbles.reshape(flat.size, 32)[:, 1].astype(np.uint8).reshape(x.shape)

    return mlx_mxfp4_elements


E2M1 = "float4_e2m1fn"
IN_RANGE = {"overflow": 0, "special": 0, "random": 0}  # |x| <= 6, finite: the pinned scale stays 1


def test_mlx_mxfp4_ties_differ_from_the_spec(mx) -> None:
    fn = make_mlx_mxfp4_elements(mx)
    with pytest.raises(ConformanceError) as info:
        assert_conforms(fn, E2M1, inputs=qs.arrays(E2M1, weights=IN_RANGE, sign="positive"), seed=0)
    # the tie rule, shrunk to one tie where the even neighbour is the larger one: 1.75 lies between 1.5 (0x3)
    # and 2 (0x4), 0.75 between 0.5 (0x1) and 1 (0x2): nearest-even picks the even code, MLX the smaller value
    assert info.value.example.tolist() in ([1.75], [0.75])
    assert "tie_rule" in info.value.report


def test_mlx_mxfp4_elements_conform_to_ties_toward_zero(mx) -> None:
    ties_toward_zero = qref.CastPolicy(rounding="nearest_toward_zero")
    fn = make_mlx_mxfp4_elements(mx)
    assert_conforms(fn, E2M1, profile=ties_toward_zero, seed=0, max_examples=300,
                    inputs=qs.arrays(E2M1, weights=IN_RANGE, sign="positive"))
    # with negative inputs one difference remains: a negative result of zero is +0 in MLX (argmin over a table
    # whose first zero is +0); no CastPolicy option models it, the block profile "mlx" does (zero_sign)
    with pytest.raises(ConformanceError) as info:
        assert_conforms(fn, E2M1, profile=ties_toward_zero, seed=0, max_examples=300,
                        inputs=qs.arrays(E2M1, weights=IN_RANGE))
    assert "signed_zero" in info.value.report and "tie_rule" not in info.value.report
    assert info.value.example.size == 1 and -0.25 <= float(info.value.example[0]) <= 0


def _block_scheme(name: str, profile: str):
    try:
        return qref.scheme(name, profile=profile)
    except qref.QrefError as exc:
        pytest.skip(f"the block family (qref.scheme({name!r}, profile={profile!r})) is not available: {exc}")


def make_mlx_quantize(mx, mode: str, bits: int):
    def mlx_quantize(x: np.ndarray) -> dict[str, np.ndarray]:
        wq, scales = mx.quantize(mx.array(x), group_size=32, bits=bits, mode=mode)
        words = np.array(wq).view(np.uint32)  # each row: a little-endian bit stream, element i at bit i * bits
        shifts = bits * np.arange(32 // bits, dtype=np.uint32)
        codes = (words[..., None] >> shifts) & ((1 << bits) - 1)
        return {"codes": codes.reshape(x.shape).astype(np.uint8), "scales": np.array(scales)}  # E8M0 bytes

    return mlx_quantize


MLX_MODES = [("mxfp4", "mxfp4", 4), ("mxfp8_e4m3", "mxfp8", 8)]


@pytest.mark.parametrize(("name", "mode", "bits"), MLX_MODES)
def test_mlx_quantize_differs_from_ocp(mx, name: str, mode: str, bits: int) -> None:
    ocp = _block_scheme(name, "ocp")
    with pytest.raises(ConformanceError) as info:
        assert_conforms(make_mlx_quantize(mx, mode, bits), ocp, seed=0)
    # the scale rule: OCP X = 2^(floor(log2 amax) - emax_elem), MLX 2^ceil(log2(amax / max_elem)); the shrunk
    # block holds one element, the largest float32
    err = info.value
    assert err.example.shape == (1, 32) and np.count_nonzero(err.example) == 1
    assert "scales differ" in err.report and "off_by_one_ulp" in err.report
    if name == "mxfp4":  # with the scale pinned by the "ties" blocks, the element tie rule shows
        with pytest.raises(ConformanceError) as info:
            assert_conforms(make_mlx_quantize(mx, mode, bits), ocp, categories=["ties"], seed=0)
        assert "tie_rule" in info.value.report and "scales differ" not in info.value.report


@pytest.mark.parametrize(("name", "mode", "bits"), MLX_MODES)
def test_mlx_quantize_conforms_to_the_mlx_block_profile(mx, name: str, mode: str, bits: int) -> None:
    assert_conforms(make_mlx_quantize(mx, mode, bits), _block_scheme(name, "mlx"), seed=0, max_examples=300)


def mlx_to_numpy(mx, a) -> np.ndarray:
    """np.array of an MLX array; bfloat16 has no buffer format, so it goes through its bits."""
    if a.dtype == mx.bfloat16:
        return np.array(a.view(mx.uint16)).view(ml_dtypes.bfloat16)
    return np.array(a)


@pytest.mark.parametrize(("dtype", "nan"), [("float32", "exact"), ("float16", "any_nan_code"),
                                            ("bfloat16", "any_nan_code")])
def test_mlx_affine_conforms_to_the_mlx_block_profile(mx, dtype: str, nan: str) -> None:
    def mlx_affine(x: np.ndarray) -> dict[str, np.ndarray]:
        wq, scales, biases = mx.quantize(mx.array(x), group_size=64, bits=4, mode="affine")
        words = np.array(wq).view(np.uint32)
        codes = (words[..., None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF
        return {"codes": codes.reshape(x.shape).astype(np.uint8), "scales": mlx_to_numpy(mx, scales),
                "biases": mlx_to_numpy(mx, biases)}

    # codes, scales and biases bit for bit; for float16 / bfloat16 inputs the NaN scale of a block holding an
    # Inf differs in its NaN bits (MLX 0.32.4: float16 0xFD00, bfloat16 +NaN 0x7FC0; qref: 0xFE00 / -NaN 0xFFC0)
    assert_conforms(mlx_affine, _block_scheme("mlx_affine", "mlx"), dtype=dtype, nan=nan, seed=0)
    if nan != "exact":
        with pytest.raises(ConformanceError, match="nan_code"):
            assert_conforms(mlx_affine, _block_scheme("mlx_affine", "mlx"), dtype=dtype, seed=0)


# ---- §6 JAX casts (XLA:CPU) ------------------------------------------------------------------------------------
def make_jax_cast(jnp, fmt: str):
    dtype = getattr(jnp, fmt)

    def jax_cast(x: np.ndarray) -> np.ndarray:
        return np.asarray(jnp.asarray(x).astype(dtype))  # an ml_dtypes array: assert_conforms reads its bits

    jax_cast.__name__ = f"jax_cast_{fmt}"
    return jax_cast


@pytest.mark.parametrize("fmt", [E4M3, "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
                                 "float8_e4m3", "float8_e3m4"])
def test_jax_fp8_casts_conform_to_the_spec(jnp, fmt: str) -> None:
    assert_conforms(make_jax_cast(jnp, fmt), fmt, profile="spec", max_examples=150, seed=0)


def test_jax_float16_nans_become_one_code(jnp) -> None:
    cast = make_jax_cast(jnp, "float8_e5m2")
    with pytest.raises(ConformanceError) as info:
        assert_conforms(cast, "float8_e5m2", dtype="float16", seed=0)
    # XLA converts every float16 NaN to E5M2 0x7F (even -NaN); qref and ml_dtypes keep the quiet NaN and its
    # sign: 0x7E / 0xFE. Both are NaN: nan="any_nan_code" accepts the difference explicitly
    assert info.value.example.view(np.uint16).tolist() == [0x7E00]
    assert "nan_code" in info.value.report
    assert_conforms(cast, "float8_e5m2", dtype="float16", nan="any_nan_code", seed=0)


def test_jax_e8m0_rounds_ties_up(jnp) -> None:
    cast = make_jax_cast(jnp, "float8_e8m0fnu")
    with pytest.raises(ConformanceError) as info:
        assert_conforms(cast, "float8_e8m0fnu", seed=0)
    # 3 = 1.5 * 2: between 2 (0x80) and 4 (0x81); nearest-even gives 0x80, XLA rounds ties up as ml_dtypes
    assert info.value.example.tolist() == [3.0]
    assert "tie_rule" in info.value.report
    # XLA's E8M0 conversion is ml_dtypes 0.5-0.6's rule (float32 subnormals round up: exponent_carry), which the
    # record ml_dtypes@0.6 models; ml_dtypes 0.7 rounds those to nearest
    assert_conforms(cast, "float8_e8m0fnu", profile="ml_dtypes@0.6", seed=0)


def test_jax_float4_sends_every_nan_to_negative_zero(jnp) -> None:
    cast = make_jax_cast(jnp, E2M1)
    with pytest.raises(ConformanceError) as info:
        assert_conforms(cast, E2M1, seed=0)
    # -NaN: the spec and ml_dtypes flip the sign (+0, 0x0); XLA gives -0 (0x8) for every NaN
    assert info.value.example.view(np.uint32).tolist() == [0xFFC00000]
    assert "nan_input" in info.value.report
    assert_conforms(cast, E2M1, inputs=qs.arrays(E2M1, allow_nan=False), seed=0)


def test_jax_bfloat16_and_float16_inputs(jnp) -> None:
    for dtype in ("float16", "bfloat16"):
        assert_conforms(make_jax_cast(jnp, E4M3), E4M3, dtype=dtype, max_examples=150, seed=0)
    x = np.array([1.0625], dtype=ml_dtypes.bfloat16)
    assert np.asarray(jnp.asarray(x).astype(jnp.float8_e4m3fn)).view(np.uint8).tolist() == [0x38]


@settings(max_examples=30, deadline=None, database=None)
@given(st.data())
def test_readme_example_given_with_values(data: st.DataObject) -> None:
    """The shortest form: a @given test over qref values, compared with assert_codes_equal (uses ml_dtypes,
    whose float32 astype is the spec for float8_e4m3fn)."""
    from qref.testing import assert_codes_equal

    x = data.draw(qs.arrays(E4M3, dtype="float32"))
    with np.errstate(invalid="ignore"):  # a signalling NaN input raises the invalid flag
        got = x.astype(ml_dtypes.float8_e4m3fn)
    assert_codes_equal(got, qref.encode(x, E4M3), E4M3, inputs=x)


def test_tutorial_code_blocks_are_this_file() -> None:
    """Every code block of docs/testing-backends.md marked "verbatim" is a verbatim excerpt of this file."""
    from pathlib import Path

    here = Path(__file__)
    doc = (here.parent.parent / "docs" / "testing-backends.md").read_text()
    source = here.read_text()
    marker = "<!-- verbatim: tests/test_kit_backends.py -->\n```python\n"
    blocks = [part.split("```", 1)[0] for part in doc.split(marker)[1:]]
    assert len(blocks) >= 10
    for block in blocks:
        assert block in source, f"docs/testing-backends.md block not found in {here.name}:\n{block}"

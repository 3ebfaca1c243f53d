"""Block profiles held bit for bit to vectors that the real code produced (peer vectors, block.md §11).

- tests/peers/microxcaling: microsoft/microxcaling's quantize_mx_op (PyTorch on CPU, commit and torch version in
  the manifest; scripts/peers/microxcaling.py) for every MX format x round x mx_flush_fp32_subnorms x input
  dtype, blocks along the last axis, the first axis and a padded length. microxcaling returns fake-quantized
  values; qref's quantize -> dequantize to the input dtype must give the same bit patterns (NaN compares by
  class). The one thing qref cannot express: MXINT8 elements that microxcaling rounds to -0 (int8 codes have no
  -0); those are asserted to be exactly the differences.
- tests/peers/transformer_engine: TransformerEngine's pure-PyTorch NVFP4 and MXFP8 references
  (scripts/peers/transformer_engine.py), codes and scale bytes as unsigned integers.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import qref

PEERS = Path(__file__).parent / "peers"
DT = {"float32": np.dtype(np.float32), "bfloat16": np.dtype(ml_dtypes.bfloat16), "float16": np.dtype(np.float16)}
MX_NAMES = {"fp8_e4m3": "mxfp8_e4m3", "fp8_e5m2": "mxfp8_e5m2", "fp6_e3m2": "mxfp6_e3m2", "fp6_e2m3": "mxfp6_e2m3",
            "fp4_e2m1": "mxfp4", "int8": "mxint8"}
# microxcaling's round= -> qref's rounding field (block.md §4.7.1)
MX_ROUND = {"nearest": "nearest_away", "floor": "toward_zero", "even": "nearest_even"}
LAYOUTS = (("", -1), ("_axis0", 0), ("_pad", -1))


def load(name: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    d = PEERS / name
    man = json.loads((d / "manifest.json").read_text())
    raw = (d / "vectors.npz").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == man["sha256"], "vectors.npz does not match its manifest"
    with np.load(d / "vectors.npz", allow_pickle=False) as z:
        return man, {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def mxx() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    return load("microxcaling")


def mxx_configs() -> list[tuple[str, str, str, int]]:
    man = json.loads((PEERS / "microxcaling" / "manifest.json").read_text())
    return [(dt, f, r, fl) for dt in man["dtypes"] for f in man["formats"] for r in man["rounds"] for fl in (0, 1)]


def mxx_scheme(fmt: str, rnd: str, flush: int, **over: Any) -> qref.BlockScheme:
    kw: dict[str, Any] = {"rounding": MX_ROUND[rnd], "flush_subnormal_blocks": bool(flush), **over}
    return qref.scheme(MX_NAMES[fmt], profile="microxcaling", **kw)


def value_differences(sch: qref.BlockScheme, x: np.ndarray, want: np.ndarray, axis: int = -1, **kw: Any
                      ) -> tuple[int, int, int]:
    """(values compared, differences, differences that are microxcaling -0 against qref +0 from code 0) of
    quantize -> dequantize to x's dtype against microxcaling's fake-quantized bits ``want``."""
    T = x.dtype
    ui = np.dtype(f"u{T.itemsize}")
    with np.errstate(all="ignore"):
        q = sch.quantize(x, axis=axis, **kw)
        got = sch.dequantize(q, dtype=T).view(ui)
        both_nan = np.isnan(got.view(T).astype(np.float64)) & np.isnan(want.view(T).astype(np.float64))
    diff = (got != want) & ~both_nan
    sign = ui.type(1 << (8 * T.itemsize - 1))
    nz = diff & (want == sign) & (got == 0) & (q.codes == 0) & (sch.element.name.startswith("int"))
    return want.size, int(diff.sum()), int(nz.sum())


def mxx_differences(z: dict[str, np.ndarray], dt: str, fmt: str, rnd: str, flush: int, **over: Any
                    ) -> tuple[int, int, int]:
    """value_differences summed over the three layouts of one configuration."""
    sch = mxx_scheme(fmt, rnd, flush, **over)
    out = [value_differences(sch, z[f"{dt}__x{suffix}"].view(DT[dt]), z[f"{dt}__{fmt}__{rnd}__{flush}__y{suffix}"],
                             axis) for suffix, axis in LAYOUTS]
    return sum(o[0] for o in out), sum(o[1] for o in out), sum(o[2] for o in out)


@pytest.mark.parametrize("dt,fmt,rnd,flush", mxx_configs(), ids=lambda v: str(v))
def test_microxcaling_profile_equals_quantize_mx_op(mxx: tuple[dict[str, Any], dict[str, np.ndarray]], dt: str,
                                                    fmt: str, rnd: str, flush: int) -> None:
    """Every value equal; the only differences are MXINT8 -0 (not expressible in int8 codes), all of them."""
    _, z = mxx
    n, bad, negzero = mxx_differences(z, dt, fmt, rnd, flush)
    assert n > 20000
    assert bad == negzero, (bad, negzero)
    if fmt != "int8":
        assert bad == 0


def test_microxcaling_vectors_record_the_run(mxx: tuple[dict[str, Any], dict[str, np.ndarray]]) -> None:
    man, z = mxx
    assert man["commit"] == "7bc41952de394f5cc5e782baf132e7c7542eb4e4"
    assert man["torch"].startswith("2.13.0")
    assert man["configs"] == 108 and man["dtypes"] == ["float32", "bfloat16", "float16"]
    assert all(a.dtype.kind == "u" for a in z.values())
    prof = qref.get_profile("microxcaling", "block")
    assert prof.status == "peer_vectors" and any("tests/test_block_peers.py" in e for e in prof.evidence)


# Each mechanism of the record, switched back to the exact rule, must break agreement somewhere in the vectors:
# (field override, dtype, format, round, flush)
MECHANISMS = [
    ({"scale_rule": "floor"}, "float32", "fp8_e4m3", "nearest", 0),            # float32 log2 near powers of two
    ({"scale_rule": "floor_log2_float32"}, "bfloat16", "fp4_e2m1", "nearest", 0),  # log2 rounded to bfloat16
    ({"element_exponent": "exact"}, "float32", "fp8_e4m3", "floor", 0),        # element log2 below 2^k
    ({"element_exponent": "exact"}, "bfloat16", "fp6_e3m2", "floor", 0),
    ({"round_arith": "exact"}, "float32", "fp4_e2m1", "nearest", 0),          # fl(|m| + 1/2)
    ({"round_arith": "exact"}, "bfloat16", "int8", "even", 0),
    ({"divisor_out_of_range": "divide"}, "float16", "fp8_e4m3", "nearest", 0),  # 2^e is 0 in float16
    ({"flush_subnormal_blocks": False}, "float32", "fp8_e5m2", "nearest", 1),
    ({"compute_dtype": "float32"}, "bfloat16", "fp8_e5m2", "nearest", 0),
]


@pytest.mark.parametrize("over,dt,fmt,rnd,flush", MECHANISMS, ids=lambda v: str(v))
def test_each_microxcaling_mechanism_is_needed(mxx: tuple[dict[str, Any], dict[str, np.ndarray]],
                                               over: dict[str, Any], dt: str, fmt: str, rnd: str, flush: int) -> None:
    _, z = mxx
    _, bad, negzero = mxx_differences(z, dt, fmt, rnd, flush, **over)
    assert bad - negzero > 0, over


# microxcaling round="dither" (block.md §13.3): the same quantizer with torch.rand_like replaced by R * 2^-N
# (scripts/peers/microxcaling_dither.py), held to rounding="stochastic_a" with stochastic_bits=N, random_bits=R
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mxx_dither() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    return load("microxcaling_dither")


def dither_configs() -> list[tuple[str, str, int]]:
    man = json.loads((PEERS / "microxcaling_dither" / "manifest.json").read_text())
    return [(dt, f, fl) for dt in man["dtypes"] for f in man["formats"] for fl in (0, 1)]


def dither_differences(z: dict[str, np.ndarray], man: dict[str, Any], dt: str, fmt: str, flush: int, **over: Any
                       ) -> tuple[int, int, int]:
    """value_differences of rounding="stochastic_a" with N = the dtype's dither bits and the stored R."""
    kw: dict[str, Any] = {"rounding": "stochastic_a", "stochastic_bits": man["dither_bits"][dt],
                          "flush_subnormal_blocks": bool(flush), **over}
    sch = qref.scheme(MX_NAMES[fmt], profile="microxcaling", **kw)
    tag = f"{dt}__{fmt}__{flush}"
    return value_differences(sch, z[f"{dt}__x"].view(DT[dt]), z[f"{tag}__y"], random_bits=z[f"{tag}__r"])


@pytest.mark.parametrize("dt,fmt,flush", dither_configs(), ids=lambda v: str(v))
def test_microxcaling_dither_equals_stochastic_a_in_dtype(mxx_dither: tuple[dict[str, Any], dict[str, np.ndarray]],
                                                          dt: str, fmt: str, flush: int) -> None:
    """floor(fl_T(|m| + R 2^-N)) = the scaled-integer step with stochastic_a: every value equal but MXINT8 -0."""
    man, z = mxx_dither
    n, bad, negzero = dither_differences(z, man, dt, fmt, flush)
    assert n > 8000
    assert bad == negzero, (bad, negzero)
    if fmt != "int8":
        assert bad == 0


def test_dither_needs_the_rounded_sum(mxx_dither: tuple[dict[str, Any], dict[str, np.ndarray]]) -> None:
    """The exact floor(|m| + u) (round_arith="exact") disagrees with microxcaling somewhere: fl_T(|m| + u)
    rounds up to the next integer within half an ulp of it (block.md §13.3)."""
    man, z = mxx_dither
    bad = sum(dither_differences(z, man, dt, fmt, 0, round_arith="exact", element_exponent="floor_log2_in_dtype")[1]
              - dither_differences(z, man, dt, fmt, 0, round_arith="exact",
                                   element_exponent="floor_log2_in_dtype")[2]
              for dt in ("bfloat16", "float16") for fmt in ("fp8_e4m3", "int8"))
    assert bad > 0


def test_microxcaling_dither_vectors_record_the_run(mxx_dither: tuple[dict[str, Any], dict[str, np.ndarray]]) -> None:
    man, z = mxx_dither
    assert man["commit"] == "7bc41952de394f5cc5e782baf132e7c7542eb4e4"
    assert man["torch"].startswith("2.13.0")
    assert man["configs"] == 36 and man["dither_bits"] == {"float32": 24, "bfloat16": 8, "float16": 11}
    assert all(a.dtype.kind == "u" for a in z.values())


# ---------------------------------------------------------------------------------------------------------
# TransformerEngine's pure-PyTorch references (the CUDA kernels need a Blackwell GPU)
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def te() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    return load("transformer_engine")


def te_tensors(kind: str) -> list[str]:
    man = json.loads((PEERS / "transformer_engine" / "manifest.json").read_text())
    nonfinite = [t for t in man["tensors"] if t.split("__")[1] in ("nan", "inf")]
    return nonfinite if kind == "nonfinite" else [t for t in man["tensors"] if t not in nonfinite]


def te_input(z: dict[str, np.ndarray], tensor: str) -> np.ndarray:
    return z[f"{tensor}__x"].view(DT[tensor.split("__")[0]])


def te_nvfp4(z: dict[str, np.ndarray], tensor: str, profile: str = "nvidia", **over: Any
             ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """{name: (qref, reference, qref's unspecified mask)} for the rowwise and columnwise (x.T) NVFP4 codes, scale
    bytes and the global amax (float32 bits)."""
    sch = qref.scheme("nvfp4", profile=profile, **over)
    x = te_input(z, tensor)
    with np.errstate(all="ignore"):
        q, qt = sch.quantize(x), sch.quantize(np.ascontiguousarray(x.T))
    if np.isfinite(x.astype(np.float64)).all():
        assert not q.unspecified.any() and not qt.unspecified.any()
    g = np.asarray(q.global_scale, np.float32).reshape(1)
    return {"codes": (q.codes, z[f"{tensor}__nvfp4_codes"], q.unspecified),
            "scales": (q.scales, z[f"{tensor}__nvfp4_scales"], q.meta["scales_unspecified"]),
            "codes_t": (qt.codes, z[f"{tensor}__nvfp4_codes_t"], qt.unspecified),
            "scales_t": (qt.scales, z[f"{tensor}__nvfp4_scales_t"], qt.meta["scales_unspecified"]),
            "global_amax": (g.view(np.uint32), z[f"{tensor}__nvfp4_global_amax"], np.isnan(g))}


@pytest.mark.parametrize("tensor", te_tensors("finite") + te_tensors("nonfinite")[1::2], ids=lambda v: v)
def test_nvidia_nvfp4_equals_te_reference(te: tuple[dict[str, Any], dict[str, np.ndarray]], tensor: str) -> None:
    """Codes, scale bytes and the global amax bit for bit on finite (and Inf) tensors, except where the reference
    differs from the kernel by its source: a scaled value that is exactly -0 gets code 0 from the reference's
    comparisons (x < -0.0 is false) and 0x8 from the kernel's cvt; zero_sign='scaled_zero_positive' is that rule."""
    _, z = te
    negzero = 0
    for name, (got, want, _) in te_nvfp4(z, tensor).items():
        diff = got != want
        if name.startswith("codes"):
            assert ((got[diff] == 0x8) & (want[diff] == 0)).all(), name
            negzero += int(diff.sum())
        else:
            assert not diff.any(), name
    for name, (got, want, _) in te_nvfp4(z, tensor, zero_sign="scaled_zero_positive").items():
        assert (got == want).all(), name
    if tensor.split("__")[1] in ("zeros", "e2m1_ties", "tiny"):
        assert negzero > 0


@pytest.mark.parametrize("tensor", te_tensors("nonfinite")[0::2], ids=lambda v: v)
def test_te_nvfp4_reference_propagates_nan(te: tuple[dict[str, Any], dict[str, np.ndarray]], tensor: str) -> None:
    """One NaN input: the reference's torch.max makes the global amax NaN, so every scale is NaN (0xFF) and every
    code 0; the kernel (PTX max) and the nvidia profile skip the NaN (block.md §5.2)."""
    _, z = te
    assert tensor.split("__")[1] == "nan"
    out = te_nvfp4(z, tensor)
    assert np.isnan(z[f"{tensor}__nvfp4_global_amax"].view(np.float32)).all()
    for name in ("codes", "codes_t"):
        assert (out[name][1] == 0).all() and (out[name][0] != 0).any()
    for name in ("scales", "scales_t"):
        assert (out[name][1] == 0xFF).all() and (out[name][0] != 0xFF).all()


def te_mxfp8(z: dict[str, np.ndarray], tensor: str, profile: str = "nvidia", **over: Any
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, scales, unspecified) of the nvidia MX profile on the reference's 32 x 32 tiles (one block of 1024
    elements per tile: the tile is the reference's block, and every MX step is per block)."""
    x = te_input(z, tensor)
    R, C = x.shape
    tiles = x.reshape(R // 32, 32, C // 32, 32).transpose(0, 2, 1, 3).reshape(-1, 1024)
    sch = qref.scheme("mxfp8_e4m3", profile=profile, block_size=1024, **over)
    with np.errstate(all="ignore"):
        q = sch.quantize(tiles)

    def back(a: np.ndarray) -> np.ndarray:
        return a.reshape(R // 32, C // 32, 32, 32).transpose(0, 2, 1, 3).reshape(R, C)

    return back(q.codes), q.scales.reshape(R // 32, C // 32), back(q.unspecified)


@pytest.mark.parametrize("tensor", te_tensors("finite"), ids=lambda v: v)
def test_nvidia_mxfp8_equals_te_reference_on_finite_tiles(te: tuple[dict[str, Any], dict[str, np.ndarray]],
                                                          tensor: str) -> None:
    _, z = te
    codes, scales, unspec = te_mxfp8(z, tensor)
    assert not unspec.any()
    assert (codes == z[f"{tensor}__mxfp8_codes"]).all()
    assert (scales == z[f"{tensor}__mxfp8_scales"]).all()


def test_nvidia_mxfp8_byte0_blocks_multiply_by_2_127(te: tuple[dict[str, Any], dict[str, np.ndarray]]) -> None:
    """TE's exp2f_rcp(0) is 2^127 and its reference divides by 2^-127: byte-0 blocks are not multiplied by 1 (the
    record's earlier byte0_divisor='one' differs on the bfloat16 subnormal tiles)."""
    _, z = te
    t = "bfloat16__zeros__1"
    codes, _, _ = te_mxfp8(z, t, byte0_divisor="one")
    assert (codes != z[f"{t}__mxfp8_codes"]).sum() > 1000
    codes, _, _ = te_mxfp8(z, t)
    assert (codes == z[f"{t}__mxfp8_codes"]).all()


@pytest.mark.parametrize("tensor", te_tensors("nonfinite"), ids=lambda v: v)
def test_te_mxfp8_reference_nonfinite_tiles(te: tuple[dict[str, Any], dict[str, np.ndarray]], tensor: str) -> None:
    """Tiles holding NaN or Inf: the reference wraps the NaN exponent to byte 0 (255 + 1 in uint8) and stores 255
    for Inf (x / 2^128 = x / Inf), where the kernel's float_to_e8m0 gives 0xFF and 0xFE; every other tile is
    equal. The nvidia profile models the kernel."""
    _, z = te
    x = te_input(z, tensor).astype(np.float64)
    R, C = x.shape
    bad = ~np.isfinite(x).reshape(R // 32, 32, C // 32, 32).all(axis=(1, 3))
    nan_tile = np.isnan(x).reshape(R // 32, 32, C // 32, 32).any(axis=(1, 3))
    codes, scales, _ = te_mxfp8(z, tensor)
    want = z[f"{tensor}__mxfp8_scales"]
    assert (scales[~bad] == want[~bad]).all()
    assert (want[nan_tile] == 0).all() and (scales[nan_tile] == 255).all()
    assert (want[bad & ~nan_tile] == 255).all() and (scales[bad & ~nan_tile] == 254).all()
    tile_el = np.repeat(np.repeat(bad, 32, axis=0), 32, axis=1)
    assert (codes[~tile_el] == z[f"{tensor}__mxfp8_codes"][~tile_el]).all()


def test_te_vectors_record_the_run(te: tuple[dict[str, Any], dict[str, np.ndarray]]) -> None:
    man, z = te
    assert man["commit"] == "d0067d0da6cb01811b8072a7d304f0e00344ce2b" and man["device"] == "cpu"
    assert man["torch"].startswith("2.13.0")
    assert all(a.dtype.kind == "u" for a in z.values())


@pytest.mark.parametrize("tensor", te_tensors("finite") + te_tensors("nonfinite"), ids=lambda v: v)
def test_transformer_engine_reference_profile(te: tuple[dict[str, Any], dict[str, np.ndarray]], tensor: str) -> None:
    """The transformer_engine_reference profile equals both references on every tensor: every NVFP4 code (NaN
    tensors included: code 0), every scale byte whose value is not a NaN of unspecified sign, the global amax,
    every MXFP8 code except NaN codes (NaN inputs, Inf / Inf: the sign of an arithmetic NaN is unspecified) and
    every MXFP8 scale byte."""
    _, z = te
    for name, (got, want, unspec) in te_nvfp4(z, tensor, profile="transformer_engine_reference").items():
        if name.startswith("codes"):
            assert (got == want).all(), name
        else:
            assert (got[~unspec] == want[~unspec]).all() and (unspec.any() == ("nan" in tensor)), name
    codes, scales, unspec = te_mxfp8(z, tensor, profile="transformer_engine_reference")
    x = te_input(z, tensor).astype(np.float64)
    assert (unspec >= np.isnan(x)).all() and (unspec <= ~np.isfinite(x)).all()  # NaN codes (x / Inf, NaN inputs)
    assert (codes[~unspec] == z[f"{tensor}__mxfp8_codes"][~unspec]).all()
    assert (scales == z[f"{tensor}__mxfp8_scales"]).all()

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


def mxx_differences(z: dict[str, np.ndarray], dt: str, fmt: str, rnd: str, flush: int, **over: Any
                    ) -> tuple[int, int, int]:
    """(values compared, differences, differences that are microxcaling -0 against qref +0 from code 0)."""
    T = DT[dt]
    ui = np.dtype(f"u{T.itemsize}")
    sch = mxx_scheme(fmt, rnd, flush, **over)
    n = bad = negzero = 0
    for suffix, axis in LAYOUTS:
        x = z[f"{dt}__x{suffix}"].view(T)
        want = z[f"{dt}__{fmt}__{rnd}__{flush}__y{suffix}"]
        with np.errstate(all="ignore"):
            q = sch.quantize(x, axis=axis)
            got = sch.dequantize(q, dtype=T).view(ui)
            both_nan = np.isnan(got.view(T).astype(np.float64)) & np.isnan(want.view(T).astype(np.float64))
        diff = (got != want) & ~both_nan
        sign = ui.type(1 << (8 * T.itemsize - 1))
        nz = diff & (want == sign) & (got == 0) & (q.codes == 0) & (sch.element.name.startswith("int"))
        n += want.size
        bad += int(diff.sum())
        negzero += int(nz.sum())
    return n, bad, negzero


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

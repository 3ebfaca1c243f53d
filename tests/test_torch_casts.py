"""The element profile ``torch`` (elements.md §6.5) against the installed torch's float8 casts, bit for bit, and
the torch cast targets of the harness (qref/harness/adapters/_torch_casts.py). Real torch; skipped without it.

The expected codes of the named inputs are worked out by hand from the formats (E4M3FN max 448 = 0x7E, E8M0
byte = 127 + log2 of the power of two); the sweeps compare torch (the independent implementation) with
``qref.encode(x, fmt, profile="torch")`` code for code (the E5M2 NaN code and the E8M0 sign and zero rules
included: nan_code, unsigned_negative, absent_zero).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qref

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")

FORMATS = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")


def _t(x: np.ndarray):
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x).copy())


def _codes(x: np.ndarray, fmt: str, fn=None) -> np.ndarray:
    f = fn or (lambda v: v.to(getattr(torch, fmt)))
    return f(_t(x)).view(torch.uint8).numpy()


def _model(x: np.ndarray, fmt: str) -> np.ndarray:
    """qref's torch profile (elements.md §6.5), nothing added."""
    return qref.encode(x, fmt, profile="torch").astype(np.uint8)


@pytest.mark.parametrize("x, fmt, code", [
    (np.float32(np.inf), "float8_e4m3fn", 0x7E), (np.float32(-np.inf), "float8_e4m3fn", 0xFE),
    (np.float32(465.0), "float8_e4m3fn", 0x7E), (np.float32(464.0), "float8_e4m3fn", 0x7E),
    (np.float32(np.nan), "float8_e4m3fn", 0x7F),
    (np.float64(1.0625000000009663), "float8_e4m3fn", 0x38),  # f32 rounding lands on the tie 1.0625 -> 1.0
    (np.float32(61440.0), "float8_e5m2", 0x7C), (np.float32(np.nan), "float8_e5m2", 0x7F),
    (np.float32(248.0), "float8_e4m3fnuz", 0x80), (np.float32(-0.0), "float8_e4m3fnuz", 0x00),
    (np.float32(1.5), "float8_e8m0fnu", 0x80), (np.float32(3.0), "float8_e8m0fnu", 0x81),
    (np.float32(-4.0), "float8_e8m0fnu", 0x81), (np.float32(0.0), "float8_e8m0fnu", 0x00),
    (np.float32(np.inf), "float8_e8m0fnu", 0xFF), (np.float32(1.5 * 2.0**127), "float8_e8m0fnu", 0xFF),
    (np.float32(-np.nan), "float8_e5m2", 0xFF), (np.float32(-0.0), "float8_e8m0fnu", 0x00),
    (np.float32(-np.inf), "float8_e8m0fnu", 0xFF), (np.float32(-2.0**-127), "float8_e8m0fnu", 0x00),
])
def test_named_inputs(x, fmt, code):
    assert int(_codes(np.array([x]), fmt)[0]) == code
    assert int(_model(np.array([x]), fmt)[0]) == code


@pytest.mark.parametrize("fmt", FORMATS)
def test_profile_eager_sweep(fmt):
    rng = np.random.default_rng(31)
    vals = np.asarray(qref.decode(np.arange(256, dtype=np.uint8), fmt, dtype=np.float64))
    v = np.unique(vals[np.isfinite(vals)])
    pts = np.concatenate([v, (v[:-1] + v[1:]) / 2])
    pts = np.concatenate([pts, -pts, [np.inf, -np.inf, np.nan, -np.nan]])
    with np.errstate(over="ignore"):
        u = pts.astype(np.float32).view(np.uint32).astype(np.int64)
    near = (np.concatenate([u + d for d in (-2, -1, 0, 1, 2)]) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    ties = (v[:-1] + v[1:]) / 2
    sets = [np.arange(65536, dtype=np.uint16).view(np.float16),
            np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16),
            np.concatenate([near, rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(
                np.float32)]),
            np.concatenate([ties * (1 + 2.0**-40), ties * (1 - 2.0**-40),
                            rng.integers(0, 2**64, 200_000, dtype=np.uint64).view(np.float64)])]
    for x in sets:
        got, want = _codes(x, fmt), _model(x, fmt)
        bad = np.nonzero(got != want)[0]
        assert bad.size == 0, (f"{fmt} from {x.dtype}: {bad.size} mismatches, first {x[bad[0]]!r}: torch "
                               f"{got[bad[0]]:#x}, profile {want[bad[0]]:#x}")


def test_double_rounding_is_visible():
    """float64 inputs just above an E4M3FN tie: torch rounds through float32 (to the tie, then even)."""
    x = np.array([1.0625 * (1 + 2.0**-40), 1.1875 * (1 + 2.0**-40)])  # ties 1.0625 and 1.1875 (after 1.0, 1.125)
    assert _codes(x, "float8_e4m3fn").tolist() == [0x38, 0x3A]  # an exact rounding would give 0x39, 0x3A
    assert qref.encode(x, "float8_e4m3fn", profile="torch").tolist() == [0x38, 0x3A]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.compile's own imports (torch.jit.script_method)
def test_profile_compiled():
    """One Inductor graph (dynamic): E4M3FN from float32 ties +-1 ulp and specials, as the profile."""
    v = np.asarray(qref.decode(np.arange(256, dtype=np.uint8), "float8_e4m3fn", dtype=np.float64))
    v = np.unique(v[np.isfinite(v)])
    pts = np.concatenate([v, (v[:-1] + v[1:]) / 2, [480.0, 1e30, np.inf, np.nan]])
    with np.errstate(over="ignore"):
        pts = np.concatenate([pts, -pts]).astype(np.float32).view(np.uint32).astype(np.int64)
    x = (np.concatenate([pts - 1, pts, pts + 1]) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    f = torch.compile(lambda t: t.to(torch.float8_e4m3fn), dynamic=True)
    got = _codes(x, "float8_e4m3fn", f)
    assert np.array_equal(got, _model(x, "float8_e4m3fn"))


def test_decode_every_code():
    """Every code decoded to float32 as the exact value (NaN codes: a NaN, D3)."""
    for fmt in FORMATS:
        codes = np.arange(256, dtype=np.uint8)
        got = torch.from_numpy(codes.copy()).view(getattr(torch, fmt)).to(torch.float32).numpy()
        want = np.asarray(qref.decode(codes, fmt, dtype=np.float32))
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), fmt
        assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32)), fmt


def test_targets_on_suite_cases():
    """The harness targets: float8 encode through the adapter equals torch; float4 is unsupported eagerly."""
    from qref.conformance.case import Case
    from qref.harness.adapters import _torch_casts
    from qref.harness.model import Unsupported

    (eager,) = _torch_casts.targets("torch", compiled=False)
    assert eager.profile == "torch"
    x = np.array([1.0, 465.0, -np.inf, np.nan], np.float32)

    def mk(fmt: str) -> Case:
        return Case(id=f"elements/t/{fmt}", family="elements", operation="encode", inputs={"x": x},
                    expected={"codes": np.zeros(4, np.uint8)}, format={"name": fmt}, array_formats={"codes": fmt})
    out = eager.run([mk("float8_e4m3fn"), mk("float4_e2m1fn")])
    assert out[0]["codes"].tolist() == [0x38, 0x7E, 0xFE, 0x7F]
    assert isinstance(out[1], Unsupported) and "Float4_e2m1fn_x2" in str(out[1])

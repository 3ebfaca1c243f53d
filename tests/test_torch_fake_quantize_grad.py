"""The gradient mask of torch 2.13 fake quantization (uniform.md §4.4 F5), per tensor and per channel, against an
independent oracle: p = fl32(x * fl32(1 / s)) (the float32 operands' product is exact in float64, rounded once to
float32 by numpy), n = rint(p) + z in int64 (finite p below 2^62 only), mask = quant_min <= n <= quant_max, NaN,
+-Inf and products beyond 2^62 False. Torch's mask is x.grad != 0 after y.backward(ones); qref's is
``fake_quantize_mask``; the suite's ``uniform/fake_quantize_grad/*`` cases hold the same mask."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import qref
from qref.errors import QrefError
from qref.schemes.uniform import from_spec
from qref.schemes.uniform.gradient import fake_quantize_mask

torch = pytest.importorskip("torch", reason="PyTorch cross-check")

F32 = np.float32
SUITE = Path(__file__).resolve().parent.parent / "conformance" / "v1"
#: (quant_min, quant_max, zero point, qref storage name)
RANGES = ((-128, 127, 3, "int8"), (0, 255, 128, "uint8"), (-8, 7, -2, "int8<-8:7>"), (0, 15, 0, "uint8<0:15>"),
          (-32768, 32767, -300, "int16"), (0, 65535, 40000, "uint16"))
SCALES = (F32(0.1), F32(1 / 3), F32(0.25), F32(0.0123), F32(2.0**-140), F32(1e-45))


def points(s: np.float32, lo: int, hi: int, z: int) -> np.ndarray:
    """Every integer k and tie k + 1/2 of x * fl32(1 / s) for k in [lo - z - 3, hi - z + 3] (16-bit ranges: the
    600 k next to each bound), their one-ulp neighbours, specials and values beyond int64."""
    with np.errstate(over="ignore"):
        inv = F32(1) / s
    ks = np.arange(lo - z - 3, hi - z + 4, dtype=np.float64)
    if ks.size > 2000:
        ks = np.concatenate([ks[:600], ks[-600:]])
    with np.errstate(all="ignore"):
        base = (np.concatenate([ks, ks + 0.5]) / np.float64(inv)).astype(F32)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, 1e19, -1e19, 9.2e18], F32)
    return np.concatenate([base, np.nextafter(base, F32(np.inf)), np.nextafter(base, F32(-np.inf)), specials])


def oracle(x: np.ndarray, s: np.float32, z: int, lo: int, hi: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        inv = F32(1) / s
        p = (x.astype(np.float64) * np.float64(inv)).astype(F32)  # exact product, one rounding to float32
        ok = np.isfinite(p) & (np.abs(p) < 2.0**62)
        n = np.where(ok, np.rint(p), 0).astype(np.int64) + z
    return ok & (n >= lo) & (n <= hi)


def torch_mask(x: np.ndarray, s: np.float32, z: int, lo: int, hi: int, per_channel: bool) -> np.ndarray:
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    if per_channel:
        y = torch.fake_quantize_per_channel_affine(xt.reshape(1, -1), torch.tensor([s]),
                                                   torch.tensor([z], dtype=torch.int32), 0, lo, hi)
    else:
        y = torch.fake_quantize_per_tensor_affine(xt, float(s), z, lo, hi)
    y.backward(torch.ones_like(y))
    return (xt.grad != 0).numpy().reshape(x.shape)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_torch_mask_is_the_rounded_unclamped_code_in_range(per_channel):
    n = 0
    for lo, hi, z, name in RANGES:
        for s in SCALES:
            x = points(s, lo, hi, z)
            want = oracle(x, s, z, lo, hi)
            got = torch_mask(x, s, z, lo, hi, per_channel)
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, f"[{lo}, {hi}] z={z} s={s}: x={x[bad[0]]!r} torch {got[bad[0]]} oracle {want[bad[0]]}"
            mine = fake_quantize_mask(x, qref.scheme(name, scale=float(s), zero_point=z,
                                                     profile="pytorch_fake_quantize"))
            bad = np.flatnonzero(mine != want)
            assert bad.size == 0, f"[{lo}, {hi}] z={z} s={s}: x={x[bad[0]]!r} qref {mine[bad[0]]} oracle {want[bad[0]]}"
            n += x.size
    assert n > 100_000


def test_boundary_and_tie_examples():
    """uniform.md §4.4 F5 by hand: s = 0.5, z = 0, [-128, 127]: x = 63.5 (x / s = 127) passes, 63.75 (127.5 rounds
    to 128) does not, -64.25 (-128.5 rounds half to even to -128) passes, -64.75 (-129.5 -> -130) does not."""
    x = np.array([63.5, 63.75, -64.25, -64.75, -64.0, np.nan, np.inf], F32)
    want = np.array([True, False, True, False, True, False, False])
    sch = qref.scheme("int8", scale=0.5, zero_point=0, profile="pytorch_fake_quantize")
    assert (fake_quantize_mask(x, sch) == want).all()
    for pc in (False, True):
        assert (torch_mask(x, F32(0.5), 0, -128, 127, pc) == want).all()


def _array(entry: dict) -> np.ndarray:
    a = np.load(SUITE / entry["file"])
    return a if entry["dtype"] == "bool" else a.view(entry["dtype"])


def test_suite_cases_hold_torchs_mask():
    """The appended cases (read from the manifest: the full suite check of load_suite takes seconds) hold torch's
    mask, per tensor and per channel."""
    cases = [c for c in json.loads((SUITE / "manifest.json").read_text())["cases"]
             if c["id"].startswith("uniform/fake_quantize_grad/")]
    assert len(cases) == 6
    for c in cases:
        x, want = _array(c["inputs"]["x"]), _array(c["expected"]["grad_mask"])
        sch = from_spec(c["scheme"])
        lo, hi = sch.storage_bounds
        xt = torch.from_numpy(x.copy()).requires_grad_(True)
        if sch.granularity == "per_tensor":
            y = torch.fake_quantize_per_tensor_affine(xt, float(F32(sch.scales[0])), int(sch.zero_points[0]), lo, hi)
        else:
            y = torch.fake_quantize_per_channel_affine(xt, torch.tensor(np.asarray(sch.scales, F32)),
                                                       torch.tensor(list(sch.zero_points), dtype=torch.int32),
                                                       0, lo, hi)
        y.backward(torch.ones_like(y))
        got = (xt.grad != 0).numpy()
        assert (got == want).all(), c["id"]
        assert (fake_quantize_mask(x, sch) == want).all(), c["id"]
        assert want.any() or sch.scales[0] < 1e-38, c["id"]  # (the subnormal scale's mask is all False)


def test_mask_rejects_float_storage_and_stochastic_rounding():
    with pytest.raises(QrefError, match="integer storage"):
        fake_quantize_mask(np.zeros(3, F32), qref.scheme("float8_e4m3fn", scale=1.0, profile="onnx"))
    sch = qref.scheme("int8", scale=1.0, profile="pytorch_fake_quantize")
    spec = sch.to_spec()
    stoch = from_spec(dict(spec, arithmetic=dict(spec["arithmetic"], rounding="stochastic_a",
                                                                      stochastic_bits=8)))
    with pytest.raises(QrefError, match="deterministic rounding"):
        fake_quantize_mask(np.zeros(3, F32), stoch)

"""PyTorch 2.13 CPU quantization ops against qref's torch uniform profiles (uniform.md §4.4): 'pytorch',
'pytorch_per_channel' and 'pytorch_fake_quantize' eager (torch.compile cannot trace those ops: D7; fake quantize
under torch.compile without fullgraph breaks the graph), 'pytorch_decomposed' and 'pytorch_decomposed_per_token'
eager and under torch.compile (Inductor), 'pytorch_decomposed_inductor' compiled; bit for bit on > 10^6
edge-heavy elements per eager profile (ties at x / s = k + 1/2 and their float32 neighbours, the clamp boundaries,
NaN / +-Inf / huge / subnormal inputs, subnormal and huge scales, random values), and the gradient mask of fake
quantization (the gradient passes where the unclamped z + round(x * fl32(1 / s)) lies in [quant_min, quant_max],
computed here from qref's rounded quotient). The torch results are the system under test; qref's are the model.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

import qref
from qref.schemes.uniform import arithmetic_for

torch = pytest.importorskip("torch", reason="PyTorch cross-check")
pytest.importorskip("torch.ao.quantization.fx._decomposed")  # registers torch.ops.quantized_decomposed

F32 = np.float32
#: float32 scales: ordinary, a third, a power of two, tiny normal, subnormal, huge
SCALES = (F32(0.1), F32(1 / 3), F32(0.0078125), F32(0.013), F32(3.0e-38), F32(1.5 * 2.0**-140), F32(2.0**100),
          F32(7.0))
#: (storage, quant_min, quant_max, container dtype, zero points)
RANGES = (("int8", -128, 127, "int8", (0, 3, -128, 127)), ("uint8", 0, 255, "uint8", (0, 128, 255)),
          ("int4", -8, 7, "int8", (0, -8, 5)), ("int16", -32768, 32767, "int16", (0, -300)))


def edge_inputs(s: np.float32, lo: int, hi: int, z: int, rng: np.random.Generator, n_random: int = 4000
                ) -> np.ndarray:
    """Ties (k + 1/2) s for k across [lo - z - 3, hi - z + 3] (every k up to 600 values, then a sample) and their
    float32 neighbours, multiples k s, the clamp boundaries, specials and random values: float32."""
    ks = np.arange(lo - z - 3, hi - z + 4, dtype=np.float64)
    if ks.size > 600:
        ks = np.unique(np.concatenate([ks[:100], ks[-100:], rng.choice(ks, 400)]))
    t = ((ks + 0.5) * np.float64(s)).astype(F32)
    m = (ks * np.float64(s)).astype(F32)
    with np.errstate(over="ignore"):
        near = [np.nextafter(t, F32(np.inf)), np.nextafter(t, F32(-np.inf))]
    special = np.array([0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30, 3.4e38, -3.4e38, 1e-45, -1e-45,
                        1.17e-38, -1.17e-38, 2.0**31, -(2.0**31), 2.0**63, 2.0**64], F32)
    span = max(hi - lo, 1) * float(s)
    with np.errstate(over="ignore"):
        rand = (rng.standard_normal(n_random) * span / 2).astype(F32)
    return np.concatenate([t, *near, m, special, rand]).astype(F32)


def compare(got: np.ndarray, q: qref.QArray, what: str) -> int:
    codes = np.asarray(q.codes).astype(np.int64).reshape(-1)
    spec = ~np.asarray(q.unspecified, bool).reshape(-1)
    g = np.asarray(got).astype(np.int64).reshape(-1)
    bad = np.flatnonzero((codes != g) & spec)
    assert bad.size == 0, f"{what}: {bad.size} mismatches, first at {bad[0]}: qref {codes[bad[0]]}, torch {g[bad[0]]}"
    return int(spec.sum())


def scheme(storage: str, s, z, profile: str, lo: int, hi: int, axis: int | None = None, **overrides):
    rng = None if (lo, hi) == qref.get_format(storage).full_range else f"{lo}:{hi}"
    name = storage if rng is None else f"{storage}<{lo}:{hi}>"
    sch = qref.scheme(name, scale=s, zero_point=z, axis=axis, profile=profile)
    if overrides:
        sch = dataclasses.replace(sch, arithmetic=arithmetic_for(profile, **overrides))
    return sch


def grid(zs: tuple[int, ...], compiled: bool) -> list[tuple[np.float32, int]]:
    """(scale, zero point) pairs: all eager; compiled three scales (ordinary, tiny normal, subnormal) with two zero
    points (each pair is a graph constant: one Inductor compile each)."""
    if not compiled:
        return [(s, z) for s in SCALES for z in zs]
    return [(SCALES[0], zs[0]), (SCALES[4], zs[1]), (SCALES[5], zs[-1])]


@pytest.fixture
def quiet():
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _compiled(f, fullgraph: bool = True):
    torch._dynamo.config.recompile_limit = 10000
    torch._dynamo.config.accumulated_recompile_limit = 10000
    return torch.compile(f, dynamic=True, fullgraph=fullgraph)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_fake_quantize_per_tensor_and_channel(quiet, compiled):
    """pytorch_fake_quantize: codes read back from y = (q - z) s, and y itself against qref's dequantize; per
    tensor (8/4/16-bit ranges) and per channel (every (scale, zero point) a channel of one tensor)."""
    rng = np.random.default_rng(1)
    fpt = lambda x, s, z, lo, hi: torch.fake_quantize_per_tensor_affine(x, s, z, lo, hi)  # noqa: E731
    fpc = lambda x, s, z, lo, hi: torch.fake_quantize_per_channel_affine(x, s, z, 0, lo, hi)  # noqa: E731
    if compiled:  # fullgraph=False: Dynamo may break the graph at the op (the harness target uses fullgraph=True)
        fpt, fpc = _compiled(fpt, fullgraph=False), _compiled(fpc, fullgraph=False)
    n = 0
    for storage, lo, hi, _, zs in RANGES:
        rows, ss, zz = [], [], []
        for s, z in grid(zs, compiled):
                x = edge_inputs(s, lo, hi, z, rng, 2000 if compiled else 10000)
                y = fpt(torch.from_numpy(x), float(s), z, lo, hi).numpy()
                sch = scheme(storage, s, z, "pytorch_fake_quantize", lo, hi)
                q = sch.quantize(x)
                deq = sch.dequantize(q).astype(F32)
                spec = ~np.asarray(q.unspecified, bool)
                bad = np.flatnonzero((y.view(np.uint32) != deq.view(np.uint32)) & spec)
                assert bad.size == 0, f"{storage} s={s} z={z}: y {y[bad[0]]} qref {deq[bad[0]]} x {x[bad[0]]}"
                n += int(spec.sum())
                rows.append(x[:1200])
                ss.append(s)
                zz.append(z)
        # per channel: rows of one tensor; the per-channel kernel converts the rounded value to int64 before the
        # clamp (x * fl32(1 / s) + z beyond int64 gives quant_min: docs/conformance finding), so those are left out
        xs = np.stack(rows)
        sc = np.asarray(ss, F32)
        y = fpc(torch.from_numpy(xs), torch.from_numpy(sc), torch.from_numpy(np.asarray(zz, np.int32)), lo, hi)
        sch = scheme(storage, sc.astype(np.float64).tolist(), zz, "pytorch_fake_quantize", lo, hi, axis=0)
        q = sch.quantize(xs)
        deq = sch.dequantize(q).astype(F32)
        with np.errstate(all="ignore"):  # x * fl32(1 / s) in float32 outside int64 (or NaN: Inf * 0)
            wide = ~(np.abs(xs * (F32(1) / sc[:, None])) < F32(2.0**62))
        spec = ~np.asarray(q.unspecified, bool) & ~wide
        bad = np.flatnonzero((y.numpy().view(np.uint32) != deq.view(np.uint32)) & spec)
        assert bad.size == 0, f"per channel {storage}: {bad.size} mismatches"
        n += int(spec.sum())
    print(f"fake quantize: {n} elements compared")
    assert n > (30_000 if compiled else 1_000_000)


def test_fake_quantize_gradient_mask(quiet):
    """The backward of fake_quantize_per_tensor_affine passes the incoming gradient where the unclamped
    z + round_half_even(fl32(x * fl32(1 / s))) lies in [quant_min, quant_max] and gives 0 elsewhere (NaN: left
    out); the mask here is qref's rounded quotient (int32 storage, saturating) plus z tested against the bounds."""
    rng = np.random.default_rng(2)

    def g(x, s, z, lo, hi):
        return torch.fake_quantize_per_tensor_affine(x, s, z, lo, hi)
    n = 0
    for storage, lo, hi, _, zs in RANGES[:3]:
        for s in SCALES[:4]:
            z = zs[1]
            x = edge_inputs(s, lo, hi, z, rng)
            x = x[np.isfinite(x) | np.isinf(x)]  # NaN gradients are unspecified
            xt = torch.from_numpy(x.copy()).requires_grad_(True)
            g(xt, float(s), z, lo, hi).backward(torch.ones_like(xt))
            got = xt.grad.numpy()
            # the unclamped code: qref's quotient rounded in float32 (the pytorch_fake_quantize arithmetic), in int64
            wide = qref.scheme("int32", scale=float(s), zero_point=0, profile="pytorch_fake_quantize")
            with np.errstate(all="ignore"):  # saturated to int32: outside [lo, hi] all the same
                r = np.asarray(wide.quantize(x).codes).astype(np.int64)
                exact = np.abs(x * (F32(1) / s)) < F32(2.0**62)
            inside = (r + z >= lo) & (r + z <= hi) & exact
            expect = np.where(inside, F32(1), F32(0))
            keep = exact | np.isinf(x)
            expect = np.where(np.isinf(x), F32(0), expect)
            bad = np.flatnonzero((got != expect) & keep)
            assert bad.size == 0, f"{storage} s={s}: x={x[bad[0]]} grad {got[bad[0]]} expected {expect[bad[0]]}"
            n += int(keep.sum())
    print(f"gradient mask: {n} elements compared")
    assert n > 10_000


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_decomposed_quantize_dequantize(quiet, compiled):
    """pytorch_decomposed: quantized_decomposed.quantize_per_tensor / quantize_per_channel and their dequantize ops
    (8/4/16-bit ranges in their containers); dequantize on every code of the range (16-bit: a sample)."""
    rng = np.random.default_rng(3)
    qd = torch.ops.quantized_decomposed
    qpt = lambda x, s, z, lo, hi, dt: qd.quantize_per_tensor(x, s, z, lo, hi, dt)  # noqa: E731
    dpt = lambda c, s, z, lo, hi, dt: qd.dequantize_per_tensor(c, s, z, lo, hi, dt)  # noqa: E731
    qpc = lambda x, s, z, lo, hi, dt: qd.quantize_per_channel(x, s, z, 0, lo, hi, dt)  # noqa: E731
    dpc = lambda c, s, z, lo, hi, dt: qd.dequantize_per_channel(c, s, z, 0, lo, hi, dt)  # noqa: E731
    if compiled:
        qpt, dpt, qpc, dpc = (_compiled(f) for f in (qpt, dpt, qpc, dpc))
    n = 0
    for storage, lo, hi, container, zs in RANGES:
        dt = getattr(torch, container)
        rows, ss, zz = [], [], []
        codes = np.arange(lo, hi + 1, dtype=np.int64)
        if codes.size > 4096:
            codes = np.unique(np.concatenate([codes[:512], codes[-512:], rng.choice(codes, 3000)]))
        for s, z in grid(zs, compiled):
                x = edge_inputs(s, lo, hi, z, rng, 2000 if compiled else 10000)
                got = qpt(torch.from_numpy(x), float(s), z, lo, hi, dt).numpy()
                sch = scheme(storage, s, z, "pytorch_decomposed", lo, hi)
                n += compare(got, sch.quantize(x), f"quantize_per_tensor {storage} s={s} z={z}")
                y = dpt(torch.from_numpy(codes.astype(container)), float(s), z, lo, hi, dt).numpy()
                want = sch.dequantize(qref.QArray(codes=codes.astype(sch.codes_dtype), scheme=sch)).astype(F32)
                assert (y.view(np.uint32) == want.view(np.uint32)).all(), f"dequantize_per_tensor {storage} s={s}"
                n += codes.size
                rows.append(x[:1200])
                ss.append(s)
                zz.append(z)
        xs = np.stack(rows)
        sc = torch.from_numpy(np.asarray(ss, F32))
        zt = torch.from_numpy(np.asarray(zz, np.int64))
        sch = scheme(storage, np.asarray(ss, np.float64).tolist(), zz, "pytorch_decomposed", lo, hi, axis=0)
        n += compare(qpc(torch.from_numpy(xs), sc, zt, lo, hi, dt).numpy(), sch.quantize(xs),
                     f"quantize_per_channel {storage}")
        cs = np.broadcast_to(codes, (len(ss), codes.size)).copy()
        y = dpc(torch.from_numpy(cs.astype(container)), sc, zt, lo, hi, dt).numpy()
        want = sch.dequantize(qref.QArray(codes=cs.astype(sch.codes_dtype), scheme=sch)).astype(F32)
        assert (y.view(np.uint32) == want.view(np.uint32)).all(), f"dequantize_per_channel {storage}"
        n += cs.size
    print(f"decomposed: {n} elements compared")
    assert n > (30_000 if compiled else 1_000_000)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_decomposed_per_token(quiet, compiled):
    """pytorch_decomposed_per_token: quantize_per_token / dequantize_per_token, one token per (scale, zero
    point), float32 scales (the zero point added before rounding)."""
    rng = np.random.default_rng(4)
    qd = torch.ops.quantized_decomposed
    qt = lambda x, s, z, lo, hi, dt: qd.quantize_per_token(x, s, z, lo, hi, dt)  # noqa: E731
    dq = lambda c, s, z, lo, hi, dt: qd.dequantize_per_token(c, s, z, lo, hi, dt, torch.float32)  # noqa: E731
    if compiled:
        qt, dq = _compiled(qt), _compiled(dq)
    n = 0
    for storage, lo, hi, container, zs in RANGES:
        dt = getattr(torch, container)
        rows, ss, zz = [], [], []
        for s in SCALES:
            for z in zs:
                rows.append(edge_inputs(s, lo, hi, z, rng, 2000 if compiled else 10000)[:2000 if compiled else 8000])
                ss.append(s)
                zz.append(z)
        xs = np.stack(rows)
        sc = torch.from_numpy(np.asarray(ss, F32).reshape(-1, 1))
        sch = scheme(storage, np.asarray(ss, np.float64).tolist(), zz, "pytorch_decomposed_per_token", lo, hi,
                     axis=0)
        got = qt(torch.from_numpy(xs), sc, torch.from_numpy(np.asarray(zz, np.int32).reshape(-1, 1)), lo, hi, dt)
        n += compare(got.numpy(), sch.quantize(xs), f"quantize_per_token {storage}")
        codes = rng.integers(lo, hi + 1, size=xs.shape)
        y = dq(torch.from_numpy(codes.astype(container)), sc, torch.from_numpy(np.asarray(zz).reshape(-1, 1)), lo,
               hi, dt).numpy()
        want = sch.dequantize(qref.QArray(codes=codes.astype(sch.codes_dtype), scheme=sch)).astype(F32)
        assert (y.view(np.uint32) == want.view(np.uint32)).all(), f"dequantize_per_token {storage}"
        n += codes.size
    print(f"per token: {n} elements compared")
    assert n > (200_000 if compiled else 1_000_000)


def test_aten_quantize_per_tensor_and_channel(quiet):
    """'pytorch' (quantize_per_tensor qint8/quint8) and 'pytorch_per_channel' (quantize_per_channel, float64
    scales) on the edge inputs (eager: under torch.compile they do not trace, test_aten_quantize_does_not_compile)."""
    compiled = False
    rng = np.random.default_rng(5)
    qpt = lambda x, s, z, dt: torch.quantize_per_tensor(x, s, z, dt).int_repr()  # noqa: E731
    qpc = lambda x, s, z, dt: torch.quantize_per_channel(x, s, z, 0, dt).int_repr()  # noqa: E731
    n = 0
    for storage, lo, hi, _, zs in RANGES[:2]:
        dt = torch.qint8 if storage == "int8" else torch.quint8
        rows, ss, zz = [], [], []
        for s, z in grid(zs, compiled):
                x = edge_inputs(s, lo, hi, z, rng, 2000 if compiled else 30000)
                sch = scheme(storage, s, z, "pytorch", lo, hi)
                n += compare(qpt(torch.from_numpy(x), float(s), z, dt).numpy(), sch.quantize(x),
                             f"quantize_per_tensor {storage} s={s} z={z}")
                rows.append(x[:1200])
                ss.append(s)
                zz.append(z)
        xs = np.stack(rows)
        sch = scheme(storage, np.asarray(ss, np.float64).tolist(), zz, "pytorch_per_channel", lo, hi, axis=0)
        got = qpc(torch.from_numpy(xs), torch.tensor(np.asarray(ss, np.float64)), torch.tensor(zz), dt).numpy()
        n += compare(got, sch.quantize(xs), f"quantize_per_channel {storage}")
    print(f"aten quantize: {n} elements compared")
    assert n > (10_000 if compiled else 1_000_000)


def test_inductor_quantize_per_tensor_tensor(quiet):
    """pytorch_decomposed_inductor: torch.compile of quantized_decomposed.quantize_per_tensor.tensor (scale and zero
    point as tensors: one compiled kernel) computes fma(x, fl32(1 / s), z), rounds half to even and converts to
    the container dtype without quant_min / quant_max: an int4 range [-8, 7] in torch.int8 gives codes of the whole
    int8 range (eager clamps: pytorch_decomposed)."""
    rng = np.random.default_rng(6)
    qd = torch.ops.quantized_decomposed
    f = _compiled(lambda x, s, z, lo, hi, dt: qd.quantize_per_tensor.tensor(x, s, z, lo, hi, dt))
    n = 0
    for storage, lo, hi, container, zs in RANGES[:3]:
        dt = getattr(torch, container)
        for s, z in [(s, z) for s in SCALES for z in zs[:2]]:
            x = edge_inputs(s, lo, hi, z, rng, 3000)
            got = f(torch.from_numpy(x), torch.tensor(float(s), dtype=torch.float64), torch.tensor(z), lo, hi,
                    dt).numpy()
            # the container's full range: quant_min / quant_max are not applied
            sch = qref.scheme(container, scale=float(s), zero_point=z, profile="pytorch_decomposed_inductor")
            n += compare(got, sch.quantize(x), f"quantize_per_tensor.tensor {storage} s={s} z={z}")
            if storage == "int4" and s == SCALES[0]:
                assert (got.astype(np.int64) > hi).any() and (got.astype(np.int64) < lo).any()
    print(f"inductor quantize_per_tensor.tensor: {n} elements compared")
    assert n > 150_000


def test_aten_quantize_does_not_compile(quiet):
    """uniform.md §4.4 D7: Dynamo cannot trace quantize_per_tensor(...).int_repr() (no fake-tensor kernel), so
    torch.compile(fullgraph=True) raises (the torch_compile.quantize_per_* targets are crashes)."""
    f = _compiled(lambda x, s, z, dt: torch.quantize_per_tensor(x, s, z, dt).int_repr())
    with pytest.raises(torch._dynamo.exc.Unsupported, match="fake tensors"):
        f(torch.linspace(-2, 2, 9), 0.1, 0, torch.qint8)

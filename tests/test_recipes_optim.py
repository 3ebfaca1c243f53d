"""8-bit blockwise optimizer states (docs/spec/recipes.md §10) against bitsandbytes 0.50.2 on CPU: the dynamic
maps, blockwise quantization of both Adam moments (codes and absmax bit for bit) and Adam8bit steps (states bit
for bit; parameters within the candidates allowed by torch's faithful, not correctly rounded, float32 sqrt)."""

from __future__ import annotations

import numpy as np
import pytest

from qref.recipes import AdamState8bit, adam8bit_step, dequantize_blockwise, quantize_blockwise
from qref.tables import dynamic_map

torch = pytest.importorskip("torch", reason="bitsandbytes runs on torch")
bnb = pytest.importorskip("bitsandbytes", reason="the 8-bit optimizer states are checked against bitsandbytes")
F = pytest.importorskip("bitsandbytes.functional", reason="the 8-bit optimizer states are checked against bitsandbytes")

F32 = np.float32


def bits(a: object) -> np.ndarray:
    return np.asarray(a, dtype=F32).view(np.uint32)


@pytest.mark.parametrize("signed", [True, False])
def test_dynamic_maps_are_bitsandbytes_maps(signed: bool) -> None:
    ref = F.create_dynamic_map(signed=signed).numpy()
    assert (bits(dynamic_map(signed=signed).values) == bits(ref)).all()


@pytest.mark.parametrize("signed", [True, False])
def test_blockwise_state_quantization(signed: bool) -> None:
    rng = np.random.default_rng(0)
    n = 256 * 7 + 100
    x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 1, n)).astype(F32)
    if not signed:
        x = np.abs(x) ** 2  # a second moment
    x[:256] = 0.0  # an all-zero block
    qmap = F.create_dynamic_map(signed=signed)
    codes, st = F.quantize_blockwise(torch.from_numpy(x), code=qmap, blocksize=256)
    q = quantize_blockwise(x, signed=signed)
    assert (q.codes == codes.numpy()).all()
    assert (bits(q.scales) == bits(st.absmax.numpy())).all()
    back = F.dequantize_blockwise(codes, st).numpy()
    assert (bits(dequantize_blockwise(q)) == bits(back)).all()


def sqrt_candidates(v: np.ndarray) -> list[np.ndarray]:
    r = np.sqrt(v.astype(F32))
    return [r, np.nextafter(r, F32(np.inf)), np.nextafter(r, F32(0))]


def test_adam8bit_steps_match_bitsandbytes() -> None:
    """Teacher-forced: each step starts from bitsandbytes' parameters and 8-bit states. n is a multiple of 32,
    so torch's vectorized kernels cover every element (their add_ with alpha is an fma)."""
    rng = np.random.default_rng(1)
    n = 256 * 20
    p0 = rng.standard_normal(n).astype(F32)
    p = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = bnb.optim.Adam8bit([p], lr=1e-2, betas=(0.9, 0.999), eps=1e-8)
    ours = AdamState8bit.init(p0)
    compared = 0
    for t in range(5):
        g = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 1)).astype(F32)
        before = p.detach().numpy().copy()
        p.grad = torch.from_numpy(g.copy())
        opt.step()
        s = opt.state[p]
        cands = [adam8bit_step(before, g, ours, lr=1e-2, moment_fma=True, sqrt=lambda v, i=i: sqrt_candidates(v)[i])
                 for i in range(3)]
        new_p, new_state = cands[0]
        assert (new_state.m.codes == s["state1"].numpy()).all() and (new_state.v.codes == s["state2"].numpy()).all()
        assert (bits(new_state.m.scales) == bits(s["absmax1"].numpy())).all()
        assert (bits(new_state.v.scales) == bits(s["absmax2"].numpy())).all()
        theirs = bits(p.detach().numpy())
        ok = np.zeros(n, bool)
        for cp, _ in cands:
            ok |= bits(cp) == theirs
        assert ok.all(), (t, int((~ok).sum()))
        compared += n
        # continue from bitsandbytes' state (it is ours bit for bit)
        ours = AdamState8bit(new_state.m, new_state.v, new_state.step)
        exact_ieee = int((bits(new_p) == theirs).sum())
        assert exact_ieee > n // 2  # most elements: torch's sqrt is correctly rounded there
    assert compared == 5 * n


def test_adam8bit_initial_state() -> None:
    st = AdamState8bit.init(np.zeros((3, 100), F32))
    assert st.m.codes.shape == (3, 100) and (st.m.codes == 0).all() and (np.asarray(st.m.scales) == 0).all()
    assert (dequantize_blockwise(st.m) == 0).all() and (dequantize_blockwise(st.v) == 0).all()
    p, st2 = adam8bit_step(np.ones((3, 100), F32), np.full((3, 100), 0.5, F32), st, lr=0.1)
    assert st2.step == 1 and p.dtype == F32
    # first step of Adam from zero states, each operation one float32 rounding (numpy float32 scalars: an
    # independent evaluation of recipes.md §10.2's sequence; scalars in float64, rounded where they meet a tensor)
    f = np.float32
    b1, b2, lr, eps = 0.9, 0.999, 0.1, 1e-8
    g = f(0.5)
    m = f(f(0) * f(b1)) + f(1 - b1) * g
    v = f(f(0) * f(b2)) + (f(1 - b2) * g) * g
    denom = np.sqrt(v) / f(np.sqrt(1 - b2)) + f(eps)
    want = f(1) + (f(-lr / (1 - b1)) * m) / denom
    assert (p.view(np.uint32) == np.array(want, F32).view(np.uint32)).all(), (p.ravel()[0], want)

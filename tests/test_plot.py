"""qref.plot: each function renders to PNG with the Agg backend and draws the expected artists.

Expected artist counts come from the format definitions (e.g. E4M3FN: 256 codes, 2 NaN codes, +-0 drawn once ->
253 distinct finite values; 126 of them positive), not from the plotting code.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="qref.plot needs matplotlib (optional extra 'notebooks')")
matplotlib.use("Agg")

import qref  # noqa: E402
from qref import analysis as A  # noqa: E402
from qref import plot as P  # noqa: E402
from qref.errors import QrefError  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def save(fig, path) -> None:
    fig.savefig(path, dpi=40)
    data = path.read_bytes()
    assert data[:8] == PNG and len(data) > 1000


def n_segments(ax) -> int:
    return sum(len(c.get_segments()) for c in ax.collections if hasattr(c, "get_segments"))


@pytest.mark.parametrize("fmt, linear, positive", [
    ("float8_e4m3fn", 253, 126),   # 256 codes - 2 NaN - (-0); positives: 0x01..0x7E
    ("float8_e5m2", 247, 123),     # 256 - 6 NaN - 2 Inf - (-0); positives: 0x01..0x7B
    ("float4_e2m1fn", 15, 7),      # 16 codes, no specials, -0 dropped
    ("float6_e3m2fn", 63, 31),
])
def test_number_line_draws_every_finite_value(tmp_path, fmt, linear, positive) -> None:
    ax = P.number_line(fmt)
    assert n_segments(ax) == linear
    assert ax.get_xscale() == "linear"
    save(ax.figure, tmp_path / "lin.png")
    ax = P.number_line(fmt, log=True)
    assert n_segments(ax) == positive
    assert ax.get_xscale() == "log"
    save(ax.figure, tmp_path / "log.png")


def test_number_line_int_and_errors(tmp_path) -> None:
    ax = P.number_line("int4")
    assert n_segments(ax) == 16
    ax = P.number_line("int8<-127:127>", signed=False)
    assert n_segments(ax) == 128  # 0..127
    with pytest.raises(QrefError, match="at most 16 bits"):
        P.number_line("float32")


def test_value_histogram_with_levels(tmp_path) -> None:
    x = np.random.default_rng(0).standard_normal(5000) * 0.5
    ax = P.value_histogram(x, fmt="float4_e2m1fn", bins=50)
    assert len(ax.patches) == 50
    lv = ax.collections[0].get_segments()
    # E2M1 levels inside [min(x) - 5 %, max(x) + 5 %] of data spanning about +-2: 0, +-0.5, +-1, +-1.5 at least
    xs = sorted({s[0][0] for s in lv})
    assert {-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5} <= set(xs)
    save(ax.figure, tmp_path / "h.png")
    ax = P.value_histogram(x, levels=[0.0, 0.25], bins=10, log=False)
    assert n_segments(ax) == 2 and len(ax.patches) == 10


def test_error_vs_magnitude_and_bars(tmp_path) -> None:
    x = (np.random.default_rng(1).standard_normal((8, 64)) * 0.1).astype(np.float32)
    t = A.compare(x, ["mxfp4", "nvfp4", "int8:axis=0"])
    ax = P.error_vs_magnitude(x, t)
    assert [ln.get_label() for ln in ax.lines] == ["mxfp4", "nvfp4", "int8:axis=0"]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    save(ax.figure, tmp_path / "e.png")
    q = qref.scheme("mxfp4").quantize(x)
    ax = P.error_vs_magnitude(x, {"a": q, "b": q.dequantize()}, relative=True)
    assert len(ax.lines) == 2
    ax = P.comparison_bars(t, "sqnr_db")
    assert len(ax.patches) == 3
    assert [tk.get_text() for tk in ax.get_yticklabels()] == ["mxfp4", "nvfp4", "int8:axis=0"]
    save(ax.figure, tmp_path / "b.png")
    fig = P.compare_figure(x, t)
    assert len(fig.axes) == 2
    save(fig, tmp_path / "c.png")
    with pytest.raises(QrefError, match="mapping"):
        P.error_vs_magnitude(x, [1, 2])


def test_scale_heatmap_shows_e8m0_exponents(tmp_path) -> None:
    x = np.ones((4, 64), dtype=np.float32)
    x[2, 40] = 7.5  # block (2, 1): floor exponent floor(log2 7.5) - 2 = 0; blocks of ones: 0 - 2 = -2
    q = qref.scheme("mxfp4").quantize(x)
    ax = P.scale_heatmap(q)
    img = np.asarray(ax.images[0].get_array())
    expect = np.full((4, 2), -2.0)
    expect[2, 1] = 0.0
    assert np.array_equal(img, expect)
    assert np.array_equal(img, q.scales.astype(np.float64) - 127)
    save(ax.figure, tmp_path / "hm.png")
    ax = P.scale_heatmap(np.arange(6.0), colorbar=False, title="t")
    assert np.asarray(ax.images[0].get_array()).shape == (6, 1)


def test_scale_rule_comparison(tmp_path) -> None:
    x = np.ones((2, 64), dtype=np.float32)
    x[0, 0] = 7.5  # floor clips it (7.5 > 6 + 1); ceil / rceil do not (see test_analysis)
    fig = P.scale_rule_comparison(x, ["floor", "ceil", "rceil"], bins=10)
    axes = fig.axes
    assert len(axes) == 6
    titles = [a.get_title() for a in axes[:3]]
    assert titles[0].startswith("floor") and "clipped 1," in titles[0]
    assert "clipped 0," in titles[1] and "clipped 0," in titles[2]
    save(fig, tmp_path / "sr.png")
    with pytest.raises(QrefError, match="MX block scheme"):
        P.scale_rule_comparison(x, ["floor"], scheme="nvfp4")


def test_missing_matplotlib_gives_a_clear_error(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(QrefError, match=r"pip install 'qref\[notebooks\]'"):
        P.number_line("float8_e4m3fn")

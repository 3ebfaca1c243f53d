"""The committed block cases, recomputed by paths independent of the generator (docs/vectors.md, block.md):

- the exact Fraction oracle of tests/test_block.py (``oracle_block``: OCP MX v1.0 §6.3 from the format tables)
  on every block of every case that claims the ``ocp`` profile, and an exact NVFP4 rule written here (block.md
  §5.3) for the ``ocp`` float-scale cases; exact dequantization (value(P) 2^(X - 127), rounded once);
- the real systems where installed: MLX ``mx.quantize`` / ``mx.dequantize`` for every case claiming ``mlx``
  (mxfp4, mxfp8, nvfp4 with and without a global scale, affine groups), torchao ``to_mx`` / ``to_dtype`` for
  the torchao profiles, JAX's block quantizer under jit for ``jax``;
- every pack / unpack case against bit layouts written here with Python integers (block.md §9).
Codes are compared as unsigned integers, scales and values as bit patterns (NaN matches NaN of either sign, as
block.md §4.7 leaves an arithmetic NaN's sign open); elements a case marks unspecified are skipped.
"""

from __future__ import annotations

import itertools
import logging
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from oracle import round_magnitude, spec_of
from test_block import FLOAT_ELEMENTS, float_table, int8_table, oracle_block
from test_uniform import rn

import qref
from qref.conformance import Case, load_suite

COMMITTED = Path(__file__).resolve().parents[1] / "conformance" / "v1"
pytestmark = pytest.mark.skipif(not COMMITTED.is_dir(), reason="conformance/v1 is not in this checkout")

PROFILES = ("ocp", "microxcaling", "torchao_floor", "torchao_rceil", "mlx", "jax", "nvidia")
MX_NAMES = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8")
#: block.md §8 and §2 (C1): the schemes each profile offers
OFFERS = {"ocp": (*MX_NAMES, "nvfp4"), "microxcaling": MX_NAMES, "torchao_floor": (*MX_NAMES[:5], "nvfp4"),
          "torchao_rceil": (*MX_NAMES[:5], "nvfp4"), "mlx": ("mxfp8_e4m3", "mxfp4", "nvfp4", "mlx_affine"),
          "jax": ("mxfp8_e4m3", "nvfp4"), "nvidia": (*MX_NAMES[:5], "nvfp4")}
BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return list(load_suite(COMMITTED).select(family="block"))


def f64(a: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # signalling NaNs (random bit patterns)
        return np.asarray(a).astype(np.float64)


def bits_of(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def value_mismatch(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where bit patterns differ, NaN matching NaN of either sign."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    with np.errstate(invalid="ignore"):
        both_nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return (bits_of(a) != bits_of(b)) & ~both_nan


def blocks_last(case: Case, a: np.ndarray, k: int) -> np.ndarray:
    """An input-shaped array moved so blocks run along the last axis, padded with +0 to whole blocks, as
    (n_blocks, k) (block.md §7)."""
    ax = case.params.get("axis", -1)
    m = np.moveaxis(np.asarray(a), ax, -1)
    pad = (-m.shape[-1]) % k
    if pad:
        m = np.concatenate([m, np.zeros((*m.shape[:-1], pad), m.dtype)], axis=-1)
    return m.reshape(-1, k)


def per_block(case: Case, a: np.ndarray) -> np.ndarray:
    ax = case.params.get("axis", -1)
    return np.moveaxis(np.asarray(a), ax, -1).reshape(-1)


# ---- coverage ----------------------------------------------------------------------------------------------
def test_block_cases_cover_every_scheme_profile_and_category(cases):
    q = [c for c in cases if c.operation == "block_quantize"]
    claimed = {(c.scheme["name"], p) for c in q for p in c.profiles}
    want = {(n, p) for p, names in OFFERS.items() for n in names}
    assert want <= claimed, sorted(want - claimed)
    cats = {c.id.split("/")[-2] for c in q}
    assert {"zero", "tiny", "huge", "nonfinite", "pow2", "clamp", "ties", "random", "random_bits", "axis0", "pad",
            "constant"} <= cats
    assert {c.inputs["x"].dtype.name for c in q} == {"float32", "float16", "bfloat16", "float64"}
    assert any("global_scale" in c.inputs for c in q) and any("global_scale" in c.expected for c in q)
    d = [c for c in cases if c.operation == "block_dequantize"]
    assert {(c.scheme["name"], p) for c in d for p in c.profiles} >= {(n, p) for n, p in want}
    layouts = {c.params["layout"] for c in cases if c.operation in ("pack", "unpack")}
    assert layouts == {"lsb_first", "msb_first", "mlx", "nibble_low_first", "nibble_high_first", "ocp_mx_block"}
    for c in q:
        if c.scheme["kind"] != "affine":
            assert c.array_formats["scales"] in ("float8_e8m0fnu", "float8_e4m3fn", "float7_e4m3fnu",
                                                 "float8_e5m3fnu")


# ---- the exact OCP oracle --------------------------------------------------------------------------------
def _table(name: str) -> tuple[list[tuple[Fraction, int]], bool]:
    return (int8_table(), False) if name == "mxint8" else (float_table(*FLOAT_ELEMENTS[name]), True)


def test_ocp_mx_cases_match_the_exact_oracle(cases):
    blocks = 0
    for case in cases:
        name = (case.scheme or {}).get("name")
        if case.operation != "block_quantize" or "ocp" not in case.profiles or name not in MX_NAMES:
            continue
        table, float_elem = _table(name)
        sign = 1 << (max(c for _, c in table).bit_length() - 1) if float_elem else 0
        x = blocks_last(case, case.inputs["x"], 32)
        n_real = blocks_last(case, np.ones(case.inputs["x"].shape, bool), 32)  # False where padding
        codes = blocks_last(case, case.expected["codes"], 32)
        uc = blocks_last(case, case.unspecified.get("codes", np.zeros(case.inputs["x"].shape, bool)), 32)
        scales = per_block(case, case.expected["scales"])
        us = per_block(case, case.unspecified.get("scales", np.zeros(case.expected["scales"].shape, bool)))
        for i in range(x.shape[0]):
            xf = f64(x[i])
            real = n_real[i]
            if not np.isfinite(xf).all():  # OCP leaves NaN / Inf blocks open; qref writes byte 255
                assert us[i] and uc[i][real].all() and scales[i] == 255, (case.id, i)
                continue
            res = oracle_block([Fraction(float(v)) for v in xf], list(np.signbit(xf)), table, float_elem)
            if res is None:  # amax = 0 or an exponent outside [-127, 127]: the scale is open
                assert us[i], (case.id, i)
                if np.all(xf == 0):  # a zero block's codes are the zeros of its inputs
                    want = np.where(np.signbit(xf), sign, 0)
                    assert not uc[i].any() and (codes[i][real] == want[real]).all(), (case.id, i)
                else:
                    assert uc[i][real].all(), (case.id, i)
                continue
            byte, want = res
            assert not us[i] and not uc[i].any(), (case.id, i)
            assert int(scales[i]) == byte, (case.id, i, int(scales[i]), byte)
            assert [int(c) for c in codes[i][real]] == [c for c, r in zip(want, real) if r], (case.id, i)
            blocks += 1
    print(f"ocp MX oracle: {blocks} blocks")
    assert blocks > 1500


def _e4m3_positive() -> list[tuple[Fraction, int]]:
    return sorted((v, c) for v, c in float_table(*FLOAT_ELEMENTS["mxfp8_e4m3"]) if v >= 0 and c < 0x80)


def _rne(v: Fraction, table: list[tuple[Fraction, int]]) -> tuple[Fraction, int]:
    """Nearest (value, code) of a sorted non-negative table to v >= 0, ties to the even code, clamped to its max."""
    top = table[-1]
    if v >= top[0]:
        return top
    best = min(abs(t - v) for t, _ in table)
    cands = [(t, c) for t, c in table if abs(t - v) == best]
    return cands[0] if len(cands) == 1 else next((t, c) for t, c in cands if c % 2 == 0)


def test_ocp_nvfp4_cases_match_the_exact_rule(cases):
    """block.md §5.2 'exact': s = e4m3(amax / 6) (RNE, saturating at 448), P = E2M1(x / s) (RNE, clamp at 6);
    zero results keep the input's sign; a scale of 0 with amax > 0, and NaN / Inf blocks, are unspecified."""
    e4m3 = _e4m3_positive()
    e2m1 = sorted((v, c) for v, c in float_table(*FLOAT_ELEMENTS["mxfp4"]) if v >= 0 and c < 8)
    blocks = 0
    for case in cases:
        if case.operation != "block_quantize" or case.scheme["name"] != "nvfp4" or "ocp" not in case.profiles:
            continue
        x = blocks_last(case, case.inputs["x"], 16)
        codes = blocks_last(case, case.expected["codes"], 16)
        uc = blocks_last(case, case.unspecified.get("codes", np.zeros(case.inputs["x"].shape, bool)), 16)
        scales = per_block(case, case.expected["scales"])
        for i in range(x.shape[0]):
            xf = f64(x[i])
            if not np.isfinite(xf).all():
                assert uc[i].all(), (case.id, i)
                continue
            amax = max(abs(Fraction(float(v))) for v in xf)
            s, sc = _rne(amax / 6, e4m3)
            assert int(scales[i]) == sc, (case.id, i, int(scales[i]), sc)
            if s == 0:
                assert uc[i].all() or amax == 0, (case.id, i)
                if amax == 0:
                    assert (codes[i] == np.where(np.signbit(xf), 8, 0)).all(), (case.id, i)
                continue
            for j, v in enumerate(xf):
                _, c = _rne(abs(Fraction(float(v))) / s, e2m1)
                want = c | (8 if np.signbit(v) else 0)
                assert not uc[i, j] and int(codes[i, j]) == want, (case.id, i, j, float(v), int(codes[i, j]), want)
            blocks += 1
    print(f"ocp NVFP4 exact rule: {blocks} blocks")
    assert blocks > 200


def test_ocp_dequantize_cases_are_exact(cases):
    """value(P) 2^element_scale_exp 2^(X - 127) (MX) or value(P) value(S) (NVFP4), rounded once to the dtype."""
    n = 0
    for case in cases:
        if case.operation != "block_dequantize" or "ocp" not in case.profiles or "global_scale" in case.inputs:
            continue
        name = (case.scheme or {}).get("name")
        if name not in (*MX_NAMES, "nvfp4"):  # nvfp4_ue5m3 (UE5M3 scales): tests/test_block_scale_rules.py
            continue
        k = case.scheme["block_size"]
        dt = case.params["dtype"]
        codes = case.inputs["codes"].reshape(-1, k)
        sc = case.inputs["scales"].reshape(-1)
        y = case.expected["y"].reshape(-1, k)
        table, float_elem = _table("mxfp4" if name == "nvfp4" else name)
        value = {c: v for v, c in table}
        sign = 8 if name in ("nvfp4", "mxfp4") else 1 << (max(value).bit_length() - 1) if float_elem else 0
        ses = Fraction(1)  # the MXINT8 table already holds k 2^-6
        if name == "mxint8":
            value[0x80] = Fraction(-128, 64)  # never produced by quantize, still a two's complement code
        svals = {c: v for v, c in float_table(*FLOAT_ELEMENTS["mxfp8_e4m3"])} if name == "nvfp4" else {}
        for i in range(codes.shape[0]):
            for j in range(k):
                c = int(codes[i, j])
                if name == "nvfp4":
                    s = svals.get(int(sc[i]))
                    v = None if s is None else value[c] * s
                else:
                    v = None if sc[i] == 255 or c not in value else value[c] * ses * Fraction(2) ** (int(sc[i]) - 127)
                got = float(f64(y[i, j]))
                if v is None:
                    if name == "mxfp8_e5m2" and c & 0x7F == 0x7C and sc[i] != 255:  # E5M2 +-Inf
                        assert got == (-np.inf if c & 0x80 else np.inf), (case.id, i, j)
                    else:
                        assert np.isnan(got), (case.id, i, j)
                    n += 1
                    continue
                w = rn(v, dt)
                if isinstance(w, float):  # overflow: +-Inf
                    assert got == w, (case.id, i, j)
                else:
                    assert Fraction(got) == w, (case.id, i, j, got, w)
                if got == 0 and float_elem:  # a zero keeps the sign of the code (or of the scale's product)
                    s_neg = name == "nvfp4" and bool(int(sc[i]) & 0x80)
                    assert np.signbit(got) == (bool(c & sign) != s_neg), (case.id, i, j)
                n += 1
    print(f"ocp dequantize: {n} values")
    assert n > 50_000


# ---- MLX ------------------------------------------------------------------------------------------------------
def mlx_words(codes: np.ndarray, bits: int) -> np.ndarray:
    """MLX's packing written here: each row's codes as a little-endian bit stream in uint32 words."""
    rows = codes.reshape(codes.shape[0], -1).astype(np.uint64)
    per_row = rows.shape[1] * bits
    n_words = -(-per_row // 32)
    out = np.zeros((rows.shape[0], n_words), np.uint64)
    for i in range(rows.shape[1]):
        pos = i * bits
        w, off = divmod(pos, 32)
        out[:, w] |= (rows[:, i] << np.uint64(off)) & np.uint64(0xFFFFFFFF)
        if off + bits > 32:
            out[:, w + 1] |= rows[:, i] >> np.uint64(32 - off)
    return out.astype(np.uint32)


def mlx_codes(words: np.ndarray, bits: int, n: int) -> np.ndarray:
    w = words.astype(np.uint64)
    out = np.zeros((w.shape[0], n), np.uint64)
    mask = np.uint64((1 << bits) - 1)
    for i in range(n):
        pos = i * bits
        j, off = divmod(pos, 32)
        v = w[:, j] >> np.uint64(off)
        if off + bits > 32:
            v |= w[:, j + 1] << np.uint64(32 - off)
        out[:, i] = v & mask
    return out.astype(np.uint8)


def _mlx_mode(case: Case) -> tuple[str, dict]:
    sch = case.scheme
    if sch["kind"] == "affine":
        return "affine", {"group_size": sch["block_size"], "bits": int(sch["element"][4:])}
    return {"mxfp4": "mxfp4", "mxfp8_e4m3": "mxfp8", "nvfp4": "nvfp4"}[sch["name"]], {}


def test_mlx_reproduces_every_mlx_case(cases):
    mx = pytest.importorskip("mlx.core", reason="the mlx profile is checked against MLX (pip install 'mlx[cpu]')")
    dtypes = {np.dtype(np.float32): mx.float32, np.dtype(np.float16): mx.float16, BF16: mx.bfloat16}

    def to_mx(a: np.ndarray):
        return mx.array(a.astype(np.float32)).astype(mx.bfloat16) if a.dtype == BF16 else mx.array(a)

    def from_mx(a) -> np.ndarray:
        return np.array(a.astype(mx.float32)).astype(ml_dtypes.bfloat16) if a.dtype == mx.bfloat16 else np.array(a)

    nq = nd = 0
    for case in cases:
        if "mlx" not in case.profiles or case.operation not in ("block_quantize", "block_dequantize"):
            continue
        mode, kw = _mlx_mode(case)
        if mode != "affine":
            kw["mode"] = mode
        bits = case.scheme["element"]
        b = 4 if bits in ("float4_e2m1fn",) else 8 if bits.startswith("float8") else int(bits[4:])
        g = case.inputs.get("global_scale")
        if g is not None:
            kw["global_scale"] = mx.array(np.float32(g))
        if case.operation == "block_quantize":
            # MLX quantizes along the last axis: blocks along axis 0 are the transpose's rows (block.md §7)
            tr = (lambda a: np.ascontiguousarray(a.T)) if case.params.get("axis", -1) == 0 else (lambda a: a)
            x = tr(case.inputs["x"])
            # MLX 0.32.4 rejects nvfp4 inputs with an odd number of groups (a reshape error): append a zero row
            extra = mode == "nvfp4" and (x.size // 16) % 2 == 1
            xm = np.concatenate([x, np.zeros((1, x.shape[1]), x.dtype)]) if extra else x
            out = mx.quantize(to_mx(xm), **kw)
            words, scales = np.array(out[0])[: x.shape[0]], out[1][: x.shape[0]]
            codes = mlx_codes(words, b, x.shape[-1])
            unspec = case.unspecified.get("codes")
            ok = np.ones(x.shape, bool) if unspec is None else ~tr(unspec)
            bad = (codes != tr(case.expected["codes"])) & ok
            assert not bad.any(), (case.id, np.argwhere(bad)[:5])
            if mode == "affine":
                assert not value_mismatch(from_mx(scales), case.expected["scales"]).any(), case.id
                assert not value_mismatch(from_mx(out[2]), case.expected["biases"]).any(), case.id
            else:
                assert (np.array(scales) == tr(case.expected["scales"])).all(), case.id
            nq += int(ok.sum())
        else:
            codes = case.inputs["codes"]
            sc = case.inputs["scales"].reshape(codes.shape[0], -1)
            extra = mode == "nvfp4" and (codes.size // 16) % 2 == 1
            if extra:  # an even number of groups, as above
                codes = np.concatenate([codes, np.zeros((1, codes.shape[1]), codes.dtype)])
                sc = np.concatenate([sc, np.zeros((1, sc.shape[1]), sc.dtype)])
            words = mx.array(mlx_words(codes, b))
            args = [words, mx.array(sc)]
            if mode == "affine":
                args = [words, to_mx(case.inputs["scales"].reshape(codes.shape[0], -1)),
                        to_mx(case.inputs["biases"].reshape(codes.shape[0], -1))]
            y = case.expected["y"]
            ref = from_mx(mx.dequantize(*args, **kw, dtype=dtypes[y.dtype]))
            ref = ref.astype(y.dtype) if ref.dtype != y.dtype else ref  # nvfp4 two-level returns float32
            ref = ref[: y.shape[0]]
            bad = value_mismatch(ref, y)
            assert not bad.any(), (case.id, np.argwhere(bad)[:5], ref[bad][:5], y[bad][:5])
            nd += y.size
    print(f"mlx: {nq} codes and {nd} dequantized values compared")
    assert nq > 40_000 and nd > 40_000


# ---- torchao ----------------------------------------------------------------------------------------------
def test_torchao_reproduces_the_torchao_mx_cases(cases):
    logging.getLogger("torchao").setLevel(logging.ERROR)
    torch = pytest.importorskip("torch", reason="the torchao profiles are checked against torchao")
    mxt = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor", reason="torchao mx_formats")
    cfg = pytest.importorskip("torchao.prototype.mx_formats.config", reason="torchao mx_formats")
    const = pytest.importorskip("torchao.prototype.mx_formats.constants", reason="torchao mx_formats")
    tdt = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2, "mxfp6_e3m2": const.DTYPE_FP6_E3M2,
           "mxfp6_e2m3": const.DTYPE_FP6_E2M3, "mxfp4": torch.float4_e2m1fn_x2}
    n = 0
    for case in cases:
        name = (case.scheme or {}).get("name")
        if case.operation != "block_quantize" or name not in tdt or case.params.get("axis", -1) != -1:
            continue
        x = case.inputs["x"]
        if x.dtype not in (np.dtype(np.float32), BF16) or x.shape[-1] % 32:
            continue
        for profile, mode in (("torchao_floor", "FLOOR"), ("torchao_rceil", "RCEIL")):
            if profile not in case.profiles:
                continue
            t = (torch.from_numpy(x.view(np.uint16).astype(np.int16)).view(torch.bfloat16) if x.dtype == BF16
                 else torch.from_numpy(x.copy()))
            s, d = mxt.to_mx(t, tdt[name], 32, getattr(cfg.ScaleCalculationMode, mode))
            raw = d.view(torch.uint8).numpy()
            if name == "mxfp4":  # two codes a byte, the first in the low nibble
                codes = np.stack([raw & 15, raw >> 4], axis=-1).reshape(x.shape)
            else:
                codes = raw.reshape(x.shape)
            assert (s.view(torch.uint8).numpy().reshape(case.expected["scales"].shape)
                    == case.expected["scales"]).all(), (case.id, profile)
            ok = ~case.unspecified.get("codes", np.zeros(x.shape, bool))
            bad = (codes != case.expected["codes"]) & ok
            assert not bad.any(), (case.id, profile, np.argwhere(bad)[:5])
            n += int(ok.sum())
    print(f"torchao to_mx: {n} codes compared")
    assert n > 30_000


# ---- JAX --------------------------------------------------------------------------------------------------
def test_jax_reproduces_the_jax_cases(cases):
    jax = pytest.importorskip("jax", reason="the jax profile is checked against jax")
    jnp = jax.numpy
    smq = pytest.importorskip("jax._src.cudnn.scaled_matmul_stablehlo", reason="jax's block quantizer")
    n = 0
    for case in cases:
        if case.operation != "block_quantize" or "jax" not in case.profiles:
            continue
        if case.inputs["x"].dtype == np.float64:
            continue
        tr = (lambda a: np.ascontiguousarray(a.T)) if case.params.get("axis", -1) == 0 else (lambda a: a)
        x = tr(case.inputs["x"])
        g = case.inputs.get("global_scale")
        if case.scheme["name"] == "mxfp8_e4m3":
            conf = jax.nn.get_scaled_dot_general_config("mxfp8")
        else:
            conf = jax.nn.get_scaled_dot_general_config("nvfp4", None if g is None else jnp.array([g], jnp.float32))
        xq, sq = jax.jit(lambda a, c=conf: smq.quantize(a, c))(jnp.asarray(x))
        codes = np.asarray(xq).view(np.uint8)
        scales = np.asarray(sq).view(np.uint8)
        sok = ~tr(case.unspecified.get("scales", np.zeros(case.expected["scales"].shape, bool)))
        assert ((scales == tr(case.expected["scales"])) | ~sok).all(), case.id
        ok = ~tr(case.unspecified.get("codes", np.zeros(case.inputs["x"].shape, bool)))
        bad = (codes != tr(case.expected["codes"])) & ok
        assert not bad.any(), (case.id, np.argwhere(bad)[:5])
        n += int(ok.sum())
    print(f"jax block quantize: {n} codes compared")
    assert n > 20_000


# ---- packing layouts, written here -----------------------------------------------------------------------
def _stream(codes: list[int], b: int, msb: bool) -> list[int]:
    """Codes as a bit stream in bytes: lsb_first (bit j of the stream = bit j % 8 of byte j // 8) or msb_first."""
    nbits = len(codes) * b
    out = [0] * -(-nbits // 8)
    for i, c in enumerate(codes):
        for j in range(b):
            bit = (c >> (b - 1 - j if msb else j)) & 1
            pos = i * b + j
            out[pos // 8] |= bit << (7 - pos % 8 if msb else pos % 8)
    return out


def packed_row(codes: list[int], layout: str, b: int) -> list[int]:
    if layout == "nibble_low_first":
        codes = codes + [0] * (len(codes) % 2)
        return [codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2)]
    if layout == "nibble_high_first":
        codes = codes + [0] * (len(codes) % 2)
        return [(codes[i] << 4) | codes[i + 1] for i in range(0, len(codes), 2)]
    if layout == "mlx":
        by = _stream(codes, b, msb=False)
        by += [0] * ((-len(by)) % 4)
        return [by[i] | by[i + 1] << 8 | by[i + 2] << 16 | by[i + 3] << 24 for i in range(0, len(by), 4)]
    return _stream(codes, b, msb=layout == "msb_first")


def test_pack_and_unpack_cases_match_the_layouts(cases):
    n = 0
    for case in cases:
        if case.operation not in ("pack", "unpack"):
            continue
        layout, b = case.params["layout"], case.params["bits"]
        if case.operation == "pack":
            codes, packed = case.inputs["codes"], case.expected["packed"]
        else:
            codes, packed = case.expected["codes"], case.inputs["packed"]
        if layout == "ocp_mx_block":
            k = 32
            scales = case.inputs["scales"] if case.operation == "pack" else case.expected["scales"]
            for r in range(codes.shape[0]):
                want: list[int] = []
                for j in range(codes.shape[1] // k):
                    want += [int(scales[r, j]), *_stream([int(c) for c in codes[r, j * k:(j + 1) * k]], b, True)]
                assert [int(v) for v in packed[r]] == want, (case.id, r)
        else:
            for r in range(codes.shape[0]):
                assert [int(v) for v in packed[r]] == packed_row([int(c) for c in codes[r]], layout, b), (case.id, r)
            if layout == "mlx":
                assert packed.dtype == np.uint32
                assert (mlx_words(codes, b) == packed).all() and (mlx_codes(packed, b, codes.shape[1]) == codes).all()
        n += 1
    assert n == len([c for c in cases if c.operation in ("pack", "unpack")]) and n >= 60


# ---- N-D tiles (block.md §12) and stochastic rounding (block.md §13) ----------------------------------------
def test_tile_cases_equal_their_tiles_quantized_one_by_one(cases):
    """Each tile_quantize case against an explicit loop: every tile gathered in row-major order (the pad +0) and
    quantized as one block of the 1-D scheme (qref.schemes.tiles is not used)."""
    tiles = [c for c in cases if c.operation == "tile_quantize"]
    assert len(tiles) >= 18 and {c.scheme["block"]["name"] for c in tiles} >= {"mxfp8_e4m3", "mxfp4", "nvfp4",
                                                                               "mlx_affine", "mxint8"}
    n_codes = 0
    for case in tiles:
        shape = tuple(case.params["block_shape"])
        x = case.inputs["x"]
        axes = tuple(case.params.get("axes", range(x.ndim - len(shape), x.ndim)))
        blk = qref.scheme_from_spec(case.scheme["block"])
        g = case.inputs.get("global_scale")
        grid = [-(-x.shape[a] // t) for a, t in zip(axes, shape)]
        others = [i for i in range(x.ndim) if i not in axes]
        rows, where = [], []
        for outer in itertools.product(*(range(x.shape[i]) for i in others)):
            for tile in itertools.product(*(range(n) for n in grid)):
                idx = []
                for inner in itertools.product(*(range(t) for t in shape)):
                    full = [0] * x.ndim
                    for i, o in zip(others, outer):
                        full[i] = o
                    for a, t, j, k in zip(axes, shape, tile, inner):
                        full[a] = j * t + k
                    idx.append(tuple(full))
                rows.append([x[i] if all(v < x.shape[d] for d, v in enumerate(i)) else 0.0 for i in idx])
                where.append((outer, tile, idx))
        xb = np.array(rows, dtype=x.dtype)
        with np.errstate(all="ignore"):
            q = blk.quantize(xb, global_scale=None if g is None else g.reshape(()))
        want_codes = np.zeros_like(case.expected["codes"])
        unspec = case.unspecified.get("codes", np.zeros(x.shape, dtype=bool))
        for r, (outer, tile, idx) in enumerate(where):
            sc_index = [0] * x.ndim
            for i, o in zip(others, outer):
                sc_index[i] = o
            for a, j in zip(axes, tile):
                sc_index[a] = j
            got_scale = case.expected["scales"][tuple(sc_index)]
            assert bits_of(np.asarray(got_scale)) == bits_of(np.asarray(q.scales[r, 0])), case.id
            for c, i in enumerate(idx):
                if all(v < x.shape[d] for d, v in enumerate(i)):
                    want_codes[i] = 0 if unspec[i] else q.codes[r, c]
        assert np.array_equal(want_codes, case.expected["codes"]), case.id
        n_codes += want_codes.size
    assert n_codes > 20000


def test_ocp_stochastic_cases_equal_the_p3109_oracle(cases):
    """Every stochastic_quantize case under the exact OCP rules: y = x / X exactly, P3109 StochasticA/B/C(N) with the
    case's random_bits (tests/oracle.py), the OCP clamp; the scale byte the deterministic oracle's."""
    sto = [c for c in cases if c.operation == "stochastic_quantize"]
    assert {c.scheme["rounding"] for c in sto} == {"stochastic_a", "stochastic_b", "stochastic_c"}
    assert {c.profile for c in sto} >= {"ocp", "nvidia", "microxcaling", "mlx", "torchao_floor"}
    checked = 0
    for case in sto:
        sch = case.scheme
        if case.profile != "ocp" or sch["kind"] != "mx" or sch["element"].startswith("int"):
            continue
        fmt = qref.get_format(sch["element"])
        spec, top = spec_of(fmt), fmt.max_value
        n, mode = sch["stochastic_bits"], sch["rounding"]
        x, r = case.inputs["x"], case.inputs["random_bits"]
        unspec = case.unspecified.get("codes", np.zeros(x.shape, dtype=bool))
        vals = qref.decode(case.expected["codes"], fmt, dtype=np.float64)
        k = sch["block_size"]
        for (i, j), xv in np.ndenumerate(f64(x)):
            if unspec[i, j]:
                continue
            X = Fraction(2) ** (int(case.expected["scales"][i, j // k]) - 127)
            y = Fraction(float(xv)) / X
            a = abs(y)
            v = min(round_magnitude(spec, a, y < 0, mode, int(r[i, j]), n), top) if a else Fraction(0)
            assert Fraction(float(vals[i, j])) == (-v if y < 0 else v), (case.id, i, j)
            assert np.signbit(vals[i, j]) == np.signbit(xv), (case.id, i, j)
            checked += 1
    assert checked > 8000

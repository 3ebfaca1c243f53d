"""The committed lookup cases, recomputed by paths independent of the generator (docs/vectors.md, lut.md):

- the exact oracle of tests/test_lookup_oracle.py (Fraction rounding ``rnd`` and the decision rules
  ``code_exact``, ``code_f32_midpoints``, ``code_argmin``), assembled here into each profile's block quantizer
  from lut.md §3.2 and §6, on every element of every 4-bit case under every profile the case claims; torchao's
  int8 double quantization (lut.md §5.1) re-derived with fractions; dequantization (entry * scale, one float32
  or input-dtype operation) with numpy IEEE arithmetic;
- bitsandbytes (quantize_4bit with and without compress_statistics, dequantize_4bit, quantize_blockwise /
  dequantize_blockwise for dynamic8) and torchao's to_nf4 where installed.
"""

from __future__ import annotations

import bisect
import functools
import math
import warnings
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from test_lookup_oracle import code_argmin, code_decimal_midpoints, code_exact, code_f32_midpoints, frac, rnd

from qref.conformance import Case, load_suite

COMMITTED = Path(__file__).resolve().parents[1] / "conformance" / "v1"
pytestmark = pytest.mark.skipif(not COMMITTED.is_dir(), reason="conformance/v1 is not in this checkout")

PROFILES = ("spec", "bitsandbytes", "torchao", "openvino", "qwix")
#: torchao's NF4 literals (lut.md §1.2, torchao nf4_tensor.py), cast to the input dtype by the profile
NF4_TORCHAO = (-1.0000, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0000, 0.0796, 0.1609, 0.2461, 0.3379,
               0.4407, 0.5626, 0.7230, 1.0000)
BF16 = np.dtype(ml_dtypes.bfloat16)
NPDT = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": BF16}


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return list(load_suite(COMMITTED).select(family="lookup"))


def table_values(spec: dict) -> np.ndarray:
    return np.array([int(h, 16) for h in spec["table"]["bits"]], dtype=np.uint32).view(np.float32)


def f32(v: float | Fraction) -> np.float32:
    return np.float32(float(v))


# ---- the per-profile block quantizer, assembled from the oracle's rules --------------------------------------
def quantize_block(profile: str, xs: list[float], vals: list[Fraction], partial: bool, dtype: str
                   ) -> tuple[list[int | None], float]:
    """(codes, stored scale) of one block under a profile (lut.md §3.2, §6); None = unspecified."""
    finite = [math.isfinite(x) for x in xs]
    a = math.nan if any(math.isnan(x) for x in xs) else max(abs(x) for x in xs)
    n = len(vals)
    order = sorted(range(n), key=lambda i: (vals[i], i))
    largest, smallest = order[-1], order[0]
    if profile == "spec":
        if math.isnan(a):
            return [None] * len(xs), a
        if a == 0:
            return [code_exact(Fraction(0), vals, "even_code")] * len(xs), 0.0
        out = []
        for x, fin in zip(xs, finite):
            if math.isinf(a):
                out.append(None if not fin else code_exact(Fraction(0), vals, "even_code"))
            else:
                out.append(code_exact(rnd(frac(x) / frac(a)), vals, "even_code"))
        return out, a
    if profile == "bitsandbytes":
        d = a if not a < float(f32(1e-38)) else float(f32(1e-38))
        out = []
        for x, fin in zip(xs, finite):
            if math.isnan(d) or (not fin and math.isinf(d)):
                out.append(largest)  # NaN scaled value -> the largest entry's code
                continue
            if math.isinf(d):
                s = Fraction(0)
            elif not fin:
                s = Fraction(1) if x > 0 else Fraction(-1)  # +-inf * finite, clamped to [-1, 1]
            else:
                s = rnd(frac(x) / frac(d)) if partial else rnd(frac(x) * rnd(1 / frac(d)))
            out.append(code_f32_midpoints(max(Fraction(-1), min(Fraction(1), s)), vals, "lower_value"))
        return out, d if partial else a
    if profile == "openvino":  # lut.md §6: a = max(absmax, 2^-23); C-literal midpoints; the scale kept in float16
        if not math.isnan(a):
            a = max(a, 2.0**-23)
        out = []
        for x, fin in zip(xs, finite):
            if math.isnan(a) or (math.isinf(a) and not fin):
                s: Fraction | None = None
            elif math.isinf(a):
                s = Fraction(0)
            else:
                s = rnd(frac(x) / frac(a))
            out.append(smallest if s is None else code_decimal_midpoints(s, vals, "lower_value"))
        with np.errstate(over="ignore"):
            return out, float(np.float16(a))
    if profile == "qwix":  # lut.md §6.5: guard sqrt(tiny of the dtype); s = x * fl(1/d) (bfloat16: fl32(1/d))
        d = 1.0 if a < (2.0**-7 if dtype == "float16" else 2.0**-63) else a
        out = []
        for x, fin in zip(xs, finite):
            if math.isnan(d) or (math.isinf(d) and not fin):
                out.append(0)
                continue
            r = Fraction(0) if math.isinf(d) else rnd(1 / frac(d), "float32" if dtype == "bfloat16" else dtype)
            s = rnd(rnd(frac(x) * r), dtype)
            out.append(code_argmin(s, vals, "float32"))
        return out, d
    if profile == "torchao":
        tv = [rnd(v, dtype) for v in vals]
        out = []
        for x, fin in zip(xs, finite):
            if math.isnan(a) or a == 0 or (math.isinf(a) and not fin):
                out.append(0)  # NaN, 0/0, inf/inf -> code 0
                continue
            s = Fraction(0) if math.isinf(a) else rnd(rnd(frac(x) / frac(a)), dtype)
            out.append(code_argmin(s, tv, dtype))
        return out, a
    raise AssertionError(profile)


def blocks_of(profile: str, x: np.ndarray, block: int) -> list[tuple[np.ndarray, bool]]:
    """(flat element indices, partial) per block: row-major flattening, or along the last axis for openvino and
    qwix (lut.md §6.4, §6.5)."""
    idx = np.arange(x.size).reshape(x.shape)
    rows = idx.reshape(-1, x.shape[-1]) if profile in ("openvino", "qwix") else idx.reshape(1, -1)
    out = []
    for r in rows:
        for j in range(0, r.size, block):
            out.append((r[j:j + block], j + block > r.size))
    return out


def test_lookup_cases_cover_every_table_profile_and_category(cases):
    q = [c for c in cases if c.operation == "lookup_quantize"]
    claimed = {(c.scheme["name"], p) for c in q for p in c.profiles}
    want = {("nf4", p) for p in PROFILES} | {(t, p) for t in ("af4", "fp4_bnb", "dynamic8") for p in
                                             ("spec", "bitsandbytes")}
    assert want <= claimed, sorted(want - claimed)
    cats = {c.id.split("/")[-2] for c in q}
    assert {"midpoints", "midpoints_scaled", "zero", "partial", "special", "random", "axis2d", "large"} <= cats
    assert {c.inputs["x"].dtype.name for c in q} == {"float32", "float16", "bfloat16"}
    assert any("dq_codes" in c.expected for c in q if c.profile == "bitsandbytes")
    assert any("dq_codes" in c.expected for c in q if c.profile == "torchao")
    assert any(c.operation == "lookup_dequantize" and "dq_codes" in c.inputs for c in cases)


def _sampled(size: int, b: int) -> bool:
    """The blocks the quick test checks: every block of a case up to 4096 elements, and the first 12 and every
    64th block of a larger one (whose first blocks hold the midpoint, zero, partial and special blocks)."""
    return size <= 4096 or b < 12 or b % 64 == 0


def check_oracle(cases: list[Case], sampled: bool) -> tuple[int, set[str]]:
    """Every claimed profile's oracle on the cases' blocks: the ``_sampled`` ones, or (``sampled=False``) every
    other block, so that the two tests together check every block of every case once."""
    checked = 0
    seen = set()
    for case in cases:
        if case.operation != "lookup_quantize" or case.scheme["scale"] != "absmax":
            continue
        if case.scheme["rule"] == "grid65536":
            continue  # bitsandbytes' dynamic8 grid: checked against bitsandbytes below
        x = case.inputs["x"]
        dtype = x.dtype.name
        xs = x.astype(np.float32).astype(np.float64).reshape(-1)
        codes = case.expected["codes"].reshape(-1)
        unspec = case.unspecified.get("codes", np.zeros(x.shape, bool)).reshape(-1)
        scales = case.expected["scales"].reshape(-1)
        block = case.scheme["block_size"]
        for profile in case.profiles:
            if profile == "torchao":
                vals = [rnd(Fraction(str(v))) for v in NF4_TORCHAO]  # the literals rounded to float32
            else:
                vals = [frac(v) for v in table_values(case.scheme)]
            for b, (ix, partial) in enumerate(blocks_of(profile, x, block)):
                if _sampled(x.size, b) != sampled:
                    continue
                want, scale = quantize_block(profile, [float(v) for v in xs[ix]], vals, partial, dtype)
                for i, w in zip(ix, want):
                    if w is None:
                        assert unspec[i], (case.id, profile, int(i))
                    else:
                        assert not unspec[i] and int(codes[i]) == w, (case.id, profile, int(i), float(xs[i]),
                                                                      int(codes[i]), w)
                    checked += 1
                if profile not in ("openvino", "qwix") or x.ndim == 1:  # scales in block order
                    got = float(scales[b])
                    assert (math.isnan(got) and math.isnan(scale)) or f32(got) == f32(scale), (case.id, profile, b)
            seen.add(profile)
    return checked, seen


def test_quantize_cases_match_the_exact_oracle_under_every_claimed_profile(cases):
    checked, seen = check_oracle(cases, sampled=True)
    print(f"lookup oracle: {checked} (element, profile) checks")
    assert seen == set(PROFILES)
    assert checked > 50_000


@pytest.mark.slow
def test_every_other_block_matches_the_exact_oracle(cases):
    """The blocks the quick test above leaves out (together: every block of every case)."""
    checked, seen = check_oracle(cases, sampled=False)
    assert seen == set(PROFILES) and checked > 450_000, (seen, checked)


def test_torchao_double_quantization_matches_fractions(cases):
    """lut.md §5.1 int8_absmax: offset = the exact mean rounded to the dtype; u = fl(a - offset); per 256 scales
    factor = fl(256 / fl(2 max|u|)); c = clamp(round_half_even(fl(u factor)), -128, 127)."""
    n = 0
    for case in cases:
        if case.operation != "lookup_quantize" or case.profile != "torchao":
            continue
        dt = case.inputs["x"].dtype.name
        if not np.isfinite(case.expected["scales"]).all():  # a NaN / Inf absmax: the second level is unspecified
            assert case.unspecified["dq_codes"].all(), case.id
            continue
        a = [frac(v) for v in case.expected["scales"].astype(np.float32)]
        off = rnd(sum(a) / len(a), dt)
        assert frac(case.expected["dq_offset"][0]) == off, case.id
        u = [rnd(v - off, dt) for v in a]
        codes = case.expected["dq_codes"].view(np.int8).astype(int)
        facs = case.expected["dq_scales"]
        for g in range(0, len(u), 256):
            grp = u[g:g + 256]
            fac = rnd(Fraction(256) / rnd(2 * max(abs(v) for v in grp), dt), dt)
            assert frac(facs[g // 256]) == fac, case.id
            for j, v in enumerate(grp):
                p = rnd(v * fac, dt)
                c = math.floor(p + Fraction(1, 2))
                if p + Fraction(1, 2) == c and c % 2:  # half to even
                    c -= 1
                assert int(codes[g + j]) == max(-128, min(127, c)), (case.id, g + j)
                n += 1
    assert n >= 3 * 256


def test_dequantize_cases_match_ieee_arithmetic(cases):
    """entry * scale as one float32 operation (spec, bitsandbytes, openvino) or in the input dtype with entries
    rounded to it (qwix, with float32 FTZ/DAZ), then rounded to the output dtype (lut.md §4); double-quantized
    scales reconstructed first (lut.md §5.1); ``dequant_flush`` outputs flush float32 results below 2^-126.
    NaN matches NaN."""
    n = 0
    for case in cases:
        if case.operation != "lookup_dequantize" or case.scheme["scale"] != "absmax":
            continue
        sch = case.scheme
        out = NPDT[case.params["dtype"]]
        src = case.params["input_dtype"]
        t = table_values(sch)
        codes = case.inputs["codes"].reshape(-1).astype(np.int64)
        block = sch["block_size"]
        if "dq_codes" in case.inputs:
            dq = sch["double_quant"]
            c2 = case.inputs["dq_codes"]
            off = np.float32(case.inputs["dq_offset"][0])
            if dq["kind"] == "int8_absmax":
                fac = np.repeat(case.inputs["dq_scales"], dq["block_size"])[: c2.size]
                dt = NPDT[src]
                scale = ((c2.view(np.int8).astype(np.float32) / fac).astype(dt).astype(np.float32) + off).astype(dt)
                scale = scale.astype(np.float32)
            else:
                dyn = table_values(dq["inner"])
                am2 = np.repeat(case.inputs["dq_scales"], dq["block_size"])[: c2.size]
                scale = (dyn[c2] * am2).astype(np.float32) + off
        else:
            scale = case.inputs["scales"].astype(np.float32)
        per = np.repeat(scale, block)[: codes.size]
        with np.errstate(all="ignore"):
            if sch["compute_dtype"] == "input":
                dt = NPDT[src]
                tt = t.astype(dt).astype(np.float32) if sch["dequant_table_dtype"] == "input" else t
                v = (tt[codes] * per).astype(dt)
                if sch.get("ftz") and src in ("float32", "bfloat16"):  # FTZ/DAZ of the multiply (§4)
                    tiny, p32 = 2.0**-126, tt[codes] * per  # scales are >= 0 or NaN; no entry is subnormal
                    fl = ((np.abs(p32) < tiny) | (np.abs(per) < tiny) & np.isfinite(tt[codes])) & ~np.isnan(p32)
                    v = np.where(fl, np.where(np.signbit(tt[codes]), -0.0, 0.0), v.astype(np.float32)).astype(dt)
            else:
                tt = t.astype(np.float16).astype(np.float32) if sch.get("dequant_table_dtype") == "float16" else t
                v = (tt[codes] * per).astype(np.float32)  # float16 entries: fl16(entry) * fl16(a), exact in float32
            want = v.astype(out)
            shape = case.inputs["codes"].shape
            if (case.params["dtype"] in sch.get("dequant_flush", ()) and len(shape) and shape[-1] % 2 == 0
                    and block < 2048):  # DAZ of the output conversion's float32 input (§4)
                v32 = v.astype(np.float32)
                want = np.where(np.abs(v32) < 2.0**-126, np.where(np.signbit(v32), -0.0, 0.0),
                                want.astype(np.float32)).astype(out)
        got = case.expected["y"].reshape(-1)
        gb, wb = got.view(f"u{out.itemsize}"), want.view(f"u{out.itemsize}")
        with np.errstate(invalid="ignore"):
            both_nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
        bad = np.flatnonzero((gb != wb) & ~both_nan)
        assert bad.size == 0, (case.id, bad[:5], got[bad[:5]], want[bad[:5]])
        n += got.size
    print(f"lookup dequantize: {n} values")
    assert n > 100_000


def test_quantile_type_case(cases):
    """lut.md §7: entries rounded to float16, s = fl32(fl32(x / 0.5) + 3), nearest entry (ties to the even code);
    dequantize fl32(fl32(entry - 3) * 0.5)."""
    (q,) = [c for c in cases if c.id.startswith("lookup/quantile/") and c.operation == "lookup_quantize"]
    (d,) = [c for c in cases if c.id.startswith("lookup/quantile/") and c.operation == "lookup_dequantize"]
    vals = [frac(v) for v in table_values(q.scheme)]
    assert all(rnd(v, "float16") == v for v in vals)
    x = q.inputs["x"].astype(np.float64)
    unspec = q.unspecified.get("codes", np.zeros(x.shape, bool))
    for i, v in enumerate(x):
        if math.isnan(v):
            assert unspec[i]
            continue
        if math.isinf(v):  # x / 0.5 + 3 = +-Inf: the outermost entry
            s = Fraction(10**9) if v > 0 else Fraction(-(10**9))
        else:
            s = rnd(rnd(frac(v) / Fraction(1, 2)) + 3)
        assert not unspec[i] and int(q.expected["codes"][i]) == code_exact(s, vals, "even_code"), (i, v)
    want = [f32(rnd(rnd(v - 3) * Fraction(1, 2))) for v in vals]
    assert [f32(y) for y in d.expected["y"]] == want


# ---- bitsandbytes ----------------------------------------------------------------------------------------
def _bnb():
    torch = pytest.importorskip("torch", reason="bitsandbytes runs on torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        F = pytest.importorskip("bitsandbytes.functional", reason="the bitsandbytes profile is checked against it")
    return torch, F


def _torch_in(torch, x: np.ndarray):
    t = torch.from_numpy(np.ascontiguousarray(x.astype(np.float32)).reshape(-1))
    return t.to({"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[x.dtype.name])


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    na, nb = np.isnan(a), np.isnan(b)
    return bool((na == nb).all() and (a.view(np.uint32)[~na] == b.view(np.uint32)[~nb]).all())


def test_bitsandbytes_reproduces_the_bitsandbytes_cases(cases):
    torch, F = _bnb()
    n = dq_checked = 0
    for case in cases:
        if case.operation != "lookup_quantize" or "bitsandbytes" not in case.profiles:
            continue
        name = case.scheme["name"]
        if name == "af4":
            continue  # bitsandbytes' public quantize_4bit takes nf4 and fp4 only
        x = case.inputs["x"]
        block = case.scheme["block_size"]
        unspec = case.unspecified.get("codes", np.zeros(x.shape, bool)).reshape(-1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "dynamic8":
                qb, st = F.quantize_blockwise(_torch_in(torch, x), blocksize=block)
                codes = qb.numpy().reshape(-1)
                scales = st.absmax.numpy()
            else:
                dq = case.scheme["double_quant"] is not None
                packed, st = F.quantize_4bit(_torch_in(torch, x), blocksize=block, quant_type=name.replace("_bnb", ""),
                                             compress_statistics=dq)
                b = packed.contiguous().view(torch.uint8).numpy().reshape(-1)
                codes = np.stack([b >> 4, b & 15], axis=-1).reshape(-1)[: x.size]
                scales = st.absmax.numpy()
        assert ((codes == case.expected["codes"].reshape(-1)) | unspec).all(), case.id
        if name != "dynamic8" and case.scheme["double_quant"] is not None:
            # the first level: the library's own offset may differ from the exact mean by an ulp (lut.md §5.3)
            if not np.isfinite(case.expected["dq_offset"]).all():  # a NaN / Inf absmax: unspecified
                assert case.unspecified["dq_codes"].all(), case.id
            elif np.float32(st.offset).tobytes() == case.expected["dq_offset"].tobytes():
                assert (scales == case.expected["dq_codes"]).all(), case.id
                assert _same(st.state2.absmax.numpy(), case.expected["dq_scales"]), case.id
                dq_checked += 1
        else:
            # dynamic8: the absmax of a block holding NaN is unspecified (lut.md §3.4)
            u = np.concatenate([unspec, np.zeros((-unspec.size) % block, bool)]).reshape(-1, block).any(axis=1)
            assert _same(scales[~u], case.expected["scales"].reshape(-1)[~u]), case.id
        n += int((~unspec).sum())
    print(f"bitsandbytes quantize: {n} codes; double quantization compared on {dq_checked} cases")
    assert n > 60_000 and dq_checked >= 3


def test_bitsandbytes_dequantizes_the_codes_cases(cases):
    torch, F = _bnb()
    n = 0
    for case in cases:
        if (case.operation != "lookup_dequantize" or "bitsandbytes" not in case.profiles or "dq_codes" in case.inputs
                or case.scheme["name"] == "af4"):
            continue
        name = case.scheme["name"]
        codes = case.inputs["codes"]
        out = case.expected["y"]
        tdt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[case.params["dtype"]]
        absmax = torch.from_numpy(case.inputs["scales"].astype(np.float32).copy())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "dynamic8":
                st = F.QuantState(absmax=absmax, code=torch.from_numpy(table_values(case.scheme).copy()),
                                  blocksize=case.scheme["block_size"], dtype=tdt)
                ref = F.dequantize_blockwise(torch.from_numpy(codes.copy()), st)
            else:
                packed = torch.from_numpy(((codes[0::2] << 4) | codes[1::2]).astype(np.uint8))
                st = F.QuantState(absmax=absmax, shape=torch.Size([codes.size]), blocksize=case.scheme["block_size"],
                                  quant_type=name.replace("_bnb", ""), dtype=tdt)
                ref = F.dequantize_4bit(packed.reshape(-1, 1), st)
        ref = ref.float().numpy().reshape(-1)
        ours = out.astype(np.float32)
        assert _same(ref, ours), case.id
        n += out.size
    print(f"bitsandbytes dequantize: {n} values")
    assert n > 2000


def test_torchao_reproduces_the_torchao_cases(cases):
    torch = pytest.importorskip("torch", reason="torchao runs on torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq = pytest.importorskip("torchao.quantization", reason="the torchao profile is checked against to_nf4")
    n = dq = 0
    for case in cases:
        if case.operation != "lookup_quantize" or "torchao" not in case.profiles:
            continue
        x = case.inputs["x"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nf = tq.to_nf4(_torch_in(torch, x), block_size=case.scheme["block_size"], scaler_block_size=256)
        b = nf.quantized_data.numpy()
        codes = np.stack([b >> 4, b & 15], axis=-1).reshape(-1)
        assert (codes == case.expected["codes"].reshape(-1)).all(), case.id
        mean = np.float32(nf.scaler_mean.float().item())
        if not np.isfinite(case.expected["dq_offset"]).all():  # a NaN / Inf absmax: unspecified
            assert case.unspecified["dq_codes"].all(), case.id
        elif mean.tobytes() == case.expected["dq_offset"].astype(np.float32).tobytes():
            assert (nf.quantized_scalers.numpy() == case.expected["dq_codes"].view(np.int8)).all(), case.id
            assert _same(nf.quantization_factor.float().numpy(), case.expected["dq_scales"]), case.id
            dq += 1
        n += x.size
    print(f"torchao to_nf4: {n} codes; double quantization compared on {dq} cases")
    assert n >= 3 * 16384


# ---- stochastic rounding (lut.md §3.5) ----------------------------------------------------------------------------
@functools.cache
def _lowest_codes(vals: tuple[Fraction, ...]) -> tuple[list[Fraction], dict[Fraction, int]]:
    """(the distinct table values in ascending order, the lowest code of each), once per table."""
    code: dict[Fraction, int] = {}
    for i, v in enumerate(vals):
        code.setdefault(v, i)
    return sorted(code), code


def stochastic_code(s: Fraction, vals: list[Fraction], mode: str, n: int, r: int) -> int:
    """lut.md §3.5 by fractions: the lowest code of v_j or v_(j+1) around s, up by P3109 StochasticA/B/C(N)."""
    distinct, code = _lowest_codes(tuple(vals))
    if s <= distinct[0]:
        return code[distinct[0]]
    if s >= distinct[-1]:
        return code[distinct[-1]]
    j = bisect.bisect_right(distinct, s) - 1  # the last v_j <= s
    eta = (s - distinct[j]) / (distinct[j + 1] - distinct[j])
    up = {"stochastic_a": math.floor(eta * 2**n) + r >= 2**n,
          "stochastic_b": math.floor(eta * 2 ** (n + 1)) + 2 * r + 1 >= 2 ** (n + 1),
          "stochastic_c": round(eta * 2**n) + r >= 2**n}[mode]  # round(Fraction): ties to even
    return code[distinct[j + 1] if up else distinct[j]]


def test_stochastic_cases_match_the_exact_oracle(cases):
    """Every spec-profile stochastic_quantize case: a = max |block|, s = x / a rounded once to the compute dtype,
    the code by fractions (``stochastic_code``) with the case's random_bits; NaN blocks unspecified; the scale a."""
    sto = [c for c in cases if c.operation == "stochastic_quantize"]
    assert {c.scheme["rounding"] for c in sto} == {"stochastic_a", "stochastic_b", "stochastic_c"}
    assert {c.scheme["name"] for c in sto} == {"nf4", "af4", "fp4_bnb", "dynamic8"}
    checked = ups = 0
    for case in sto:
        if case.profile != "spec":
            continue
        x, rb = case.inputs["x"], case.inputs["random_bits"].reshape(-1)
        cd = case.scheme["compute_dtype"]
        dtype = x.dtype.name if cd == "input" else cd
        xs = x.astype(np.float32).astype(np.float64).reshape(-1)
        codes = case.expected["codes"].reshape(-1)
        unspec = case.unspecified.get("codes", np.zeros(x.shape, bool)).reshape(-1)
        vals = [frac(v) for v in table_values(case.scheme)]
        mode, n, block = case.scheme["rounding"], case.scheme["stochastic_bits"], case.scheme["block_size"]
        det = [code_exact(Fraction(0), vals, "even_code")]
        for b, (ix, _) in enumerate(blocks_of("spec", x, block)):
            blk = xs[ix]
            a = math.nan if np.isnan(blk).any() else float(np.abs(blk).max())
            assert (math.isnan(a) and np.isnan(case.expected["scales"][b])) or case.expected["scales"][b] == a
            for i in ix:
                if math.isnan(a):
                    assert unspec[i], (case.id, int(i))
                    continue
                if a == 0 or math.isinf(a):
                    if not math.isfinite(xs[i]):
                        assert unspec[i], (case.id, int(i))
                        continue
                    want = det[0]
                else:
                    s = rnd(frac(xs[i]) / frac(a), dtype)
                    want = stochastic_code(s, vals, mode, n, int(rb[i]))
                    ups += want != code_exact(s, vals, "even_code")
                assert not unspec[i] and int(codes[i]) == want, (case.id, int(i), float(xs[i]), int(codes[i]), want)
                checked += 1
    assert checked > 5000 and ups > 500, (checked, ups)

"""MX block quantization, the reference: power-of-two (E8M0) block scales (spec: block.md §4).

The readable definition; the fast path (fast.py) imports it, never the reverse, and mx.py dispatches between
the two. quantize_mx_reference(s, xb) works on a (n_blocks, block_size) array and returns element codes, scale
bytes and the unspecified masks; dequantize_mx_reference(...) turns them back into values. Every choice is a
field of the BlockScheme ``s`` (block.md §2 lists them); the step order is block.md §4.1:

    amax  = max |x_i| over the finite elements of the block (in the compute dtype; DAZ when flush_subnormals)
    e     = scale_rule(amax)                     (§4.2; zero blocks: zero_block, §4.3)
    byte  = scale_range(e) + 127                 (§4.4; non-finite blocks: nonfinite_block, §4.5)
    y_i   = x_i / 2^e_div  (exact, or in the compute dtype, dividing or multiplying by the reciprocal, §4.6)
    P_i   = encode(y_i * 2^-element_scale_exp, element, rounding, overflow, nan)   (the core, §4.7)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...core import arith as fp
from ...core.decode import decode, exact_parts, target_format
from ...core.encode import CHUNK, encode_exact, encode_flat
from ...core.exact import NAN, U64, Exact, decompose
from ...errors import QrefError
from ...formats import FloatFormat, IntFormat
from ...formats.block import BlockFormat
from ...formats.policy import CastPolicy
from ...profiles.block import MXRules, ScaledRules
from . import exponents as ar

E8M0_BIAS = 127


def element_policy(rules: ScaledRules, f: BlockFormat) -> CastPolicy:
    return CastPolicy(rounding=rules.rounding, overflow=rules.overflow, nan=rules.nan,
                      stochastic_bits=rules.stochastic_bits)


def encode_exact_shifted(x: np.ndarray, shift: np.ndarray, fmt: IntFormat | FloatFormat, policy: CastPolicy,
                         rbits: np.ndarray | None = None) -> np.ndarray:
    """encode(x * 2^shift) for a flat array x and per-element integer shifts, exactly (exponent arithmetic
    on the exact triples; no floating-point multiplication). rbits: flat random integers of a stochastic
    policy (elements.md §2.5), one per element."""
    rp = policy.resolve(fmt)
    out = np.empty(x.size, dtype=fmt.code_dtype)
    for start in range(0, x.size, CHUNK):
        sl = slice(start, start + CHUNK)
        ex = decompose(x[sl])
        ex = Exact(ex.cls, ex.neg, ex.sig, ex.exp + shift[sl], ex.subnormal)
        out[sl] = encode_exact(ex, fmt, rp, None if rbits is None else rbits[sl])
    return out


def apply_zero_sign(rules: ScaledRules, f: BlockFormat, codes: np.ndarray) -> np.ndarray:
    """zero_sign="positive": a -0 result becomes +0 (MLX's FP4 argmin picks +0, the first table entry)."""
    fmt = f.element
    if isinstance(fmt, FloatFormat) and rules.zero_sign == "positive" and fmt.has_negative_zero:
        return np.where(codes == fmt.sign_mask, 0, codes).astype(fmt.code_dtype)
    return codes


def lut_argmin(y: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """MLX's FP4 rule taken literally: the first code c (in code order) minimizing fl(|y - value(c)|), with the
    subtraction rounded in y's dtype; NaN distances never win, so an all-NaN row gives code 0."""
    table = decode(np.arange(1 << fmt.bits, dtype=fmt.code_dtype), fmt, dtype=np.float64)
    ok = ~np.isnan(table)
    codes = np.arange(1 << fmt.bits)[ok]
    first = fp.table_argmin(y.reshape(-1), table[ok], y.dtype, subtract="float64", nan_distance="never")
    return codes[first].astype(fmt.code_dtype)


_PRECISION = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}


def stochastic_offset(rules: ScaledRules, f: BlockFormat, rbits: np.ndarray, T: np.dtype | None) -> np.ndarray:
    """The offset u added before the floor of a stochastic scaled-integer step (block.md §13.2): R * 2^-N
    (stochastic_a) or (2R + 1) * 2^-(N + 1) (stochastic_b), float64; with round_arith="in_dtype" u must be a
    value of the compute dtype T (at most T's precision in bits)."""
    N = rules.stochastic_bits
    assert N is not None
    r = rbits.astype(np.float64)
    if rules.rounding == "stochastic_a":
        u, width = np.ldexp(r, -N), N
    else:
        u, width = np.ldexp(2.0 * r + 1.0, -(N + 1)), N + 1
    if rules.round_arith == "in_dtype" and T is not None:
        prec = _PRECISION[np.dtype(T).name]
        if width > prec:
            raise QrefError(f"stochastic_bits={N} with rounding={rules.rounding!r} gives offsets of {width} bits, "
                            f"which {np.dtype(T).name} (precision {prec} bits) cannot hold: the scaled-integer step "
                            f"adds u in the compute dtype (block.md §13.2, C4); use stochastic_bits <= "
                            f"{prec - (width - N)}")
    return u


def integer_step_values(rules: ScaledRules, f: BlockFormat, y: np.ndarray,
                        rbits: np.ndarray | None = None) -> np.ndarray:
    """The element values (float64) that the scaled-integer element step gives for scaled values y of a
    compute dtype T = y.dtype (block.md §4.7.1):

        p = max(floor(log2 |y|), emin)      element_exponent: exact, or floor(fl_T(log2(fl_T(|y| + [y = 0]))))
        m = |y| * 2^(mbits - p)             (integer elements: m = |y| * 2^-element_scale_exp, no p)
        r = floor(m) (toward_zero) | floor(h) (nearest_away) | floor(h) - [l is an even integer] (nearest_even)
            with h = m + 1/2, l = m - 1/2 exact, or h = fl_T(m + 1/2), l = fl_T(m - 1/2) (round_arith in_dtype)
        r = floor(m + u) (stochastic_a / stochastic_b: u = stochastic_offset, fl_T(m + u) with round_arith
            in_dtype; block.md §13.2)
        v = clamp(sign(y) * r * 2^(p - mbits), -max, max)     (sign(+-0) = 0: a zero y gives +0)

    T's operations are the float32 result rounded once more for 16-bit T (fp.in_float32)."""
    fmt = f.element
    T = y.dtype
    yf = fp.f64(y)
    a = np.abs(yf)
    fin = np.isfinite(a)
    a0 = np.where(fin, a, 0.0)
    if isinstance(fmt, FloatFormat):
        mb = fmt.mantissa_bits
        emin = 1 - fmt.bias
        if rules.element_exponent == "floor_log2_in_dtype":
            lg = fp.f64(ar.log2_in(fp.in_float32(a0 + (a0 == 0), T), T))
            p = np.floor(lg).astype(np.int64)
        else:
            p = np.zeros(a0.shape, dtype=np.int64)
            pos = a0 > 0
            p[pos] = ar.floor_log2(a0[pos])
        p = np.maximum(p, emin)
        shift = mb - p
        # 2^p is Inf in T (float16, p = 16: log2 rounded up to 16): y / Inf * 2^mbits = 0, then 0 * Inf = NaN
        p_over = np.isinf(fp.f64(fp.pow2(p, T)))
    else:
        shift = np.full(a0.shape, -f.element_scale_exp, dtype=np.int64)
        p_over = np.zeros(a0.shape, dtype=bool)
    m = np.ldexp(a0, shift)  # exact: a power-of-two scaling of a value of T, within T's range
    if rules.round_arith == "in_dtype":
        def fl(v: np.ndarray) -> np.ndarray:
            return fp.f64(fp.in_float32(v, T))
    else:
        def fl(v: np.ndarray) -> np.ndarray:
            return v
    if rules.rounding == "toward_zero":
        r = np.floor(m)
    elif rules.stochastic:
        assert rbits is not None
        r = np.floor(fl(m + stochastic_offset(rules, f, rbits.reshape(m.shape), T)))
    else:
        r = np.floor(fl(m + 0.5))
        if rules.rounding == "nearest_even":
            low = fl(m - 0.5)
            r = r - ((np.floor(low) == low) & (np.mod(low, 2.0) == 0))
    lim = float(f.element_max)
    with np.errstate(invalid="ignore"):
        v = np.clip(np.sign(yf) * np.ldexp(r, -shift), -lim, lim)
    return np.where(fin, np.where(p_over, np.nan, v), yf)


def encode_elements(rules: ScaledRules, f: BlockFormat, y: np.ndarray,
                    rbits: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Codes of scaled values y (a float array in the compute dtype) and the unspecified mask (block.md §4.7).

    P = encode(y * 2^-element_scale_exp) under (rounding, overflow, nan), then zero_sign. With
    out_of_range="lut_argmin" the values beyond the element maximum and the non-finite ones take MLX's table
    rule instead (lut_argmin); within range that rule is nearest with ties toward the smaller magnitude and -0 ->
    +0 (tests/test_block_mlx.py checks it on every float16 and bfloat16 value). Otherwise a NaN y whose code
    depends on the NaN's sign is unspecified: IEEE 754 §6.3 leaves the sign of an arithmetic NaN unspecified.
    rbits: y's random integers of a stochastic rounding (block.md §13), y's shape."""
    fmt = f.element
    policy = element_policy(rules, f)
    ses = f.element_scale_exp
    y64 = fp.f64(y)
    if rules.element_exponent != "exact" or rules.round_arith != "exact":
        # the scaled-integer element step (§4.7.1) picks the value; it is exact in the element format
        y = integer_step_values(rules, f, y, rbits)
        policy = CastPolicy(rounding="nearest_even", overflow=rules.overflow, nan=rules.nan)
        rbits = None
    yflat = np.ascontiguousarray(y).reshape(-1)
    rflat = None if rbits is None else np.ascontiguousarray(rbits).reshape(-1)
    if isinstance(fmt, IntFormat) or ses != 0:
        codes = encode_exact_shifted(yflat, np.full(yflat.size, -ses, dtype=np.int64), fmt, policy, rflat)
    else:
        codes = encode_flat(yflat, fmt, policy.resolve(fmt), rflat)
    codes = apply_zero_sign(rules, f, codes.reshape(y.shape))
    if rules.zero_sign == "scaled_zero_positive" and isinstance(fmt, FloatFormat) and fmt.has_negative_zero:
        codes = np.where(y64 == 0, np.where(codes == fmt.sign_mask, 0, codes), codes).astype(fmt.code_dtype)
    unspec = np.zeros(y.shape, dtype=bool)
    if rules.out_of_range == "lut_argmin":
        assert isinstance(fmt, FloatFormat)
        far = ~(np.abs(y64) <= float(fmt.max_value))
        if far.any():
            codes = codes.copy()
            codes[far] = lut_argmin(y[far], fmt)
    elif isinstance(fmt, FloatFormat) and policy.resolve(fmt).nan in ("keep_sign", "max", "flipped_sign_zero"):
        unspec = np.isnan(y64)
    return codes, unspec


def _scale_exponent(rules: MXRules, f: BlockFormat, amax: np.ndarray, C: np.dtype | None, ftz: bool
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(e, zero) for finite amax >= 0: e = the unbiased scale exponent of scale_rule, zero = the blocks the
    rule treats as zero blocks (amax == 0, or a quotient amax / max_elem that is 0 in the compute dtype)."""
    emax, max_elem = f.element_emax, f.element_max
    rule = rules.scale_rule
    e = np.zeros(amax.shape, dtype=np.int64)
    if rule in ("floor", "ceil", "even", "floor_log2_float32", "floor_log2_in_dtype", "floor_plus_one"):
        zero = amax == 0
        pos = ~zero
        a = amax[pos]
        if rule == "floor":
            e[pos] = ar.floor_log2(a) - emax
        elif rule == "floor_plus_one":  # a block scale twice OCP's (block.md §4.2)
            e[pos] = ar.floor_log2(a) - emax + 1
        elif rule == "ceil":
            e[pos] = ar.ceil_log2(a) - emax
        elif rule == "even":
            e[pos] = ar.round_half_up_exponent(a, f.element_mantissa_bits) - emax
        elif rule == "floor_log2_float32":
            e[pos] = np.floor(ar.log2_float32(fp.round_to(a, fp.F32))).astype(np.int64) - emax
        else:  # floor_log2_in_dtype (block.md §3.3): the float32 logarithm rounded once more to a 16-bit C
            e[pos] = np.floor(fp.f64(ar.log2_in(a, C))).astype(np.int64) - emax
        return e, zero
    # rceil family: r = amax / max_elem, exact or rounded to the compute dtype
    if C is None:
        zero = amax == 0
        pos = ~zero
        e[pos] = ar.ceil_log2_ratio(amax[pos], max_elem)
        return e, zero
    if rules.quotient_arith == "divide":
        r = fp.div(amax, float(max_elem), C, ftz)
    else:  # amax * fl(1 / max_elem) (XLA, TE): the constant is rounded to float16 for float16 and to float32
        # otherwise (XLA:CPU computes bfloat16 arithmetic in float32, where it folds the reciprocal)
        const_dtype = fp.F16 if C == fp.F16 else fp.F32
        r = fp.mul(amax, fp.round_to(np.float64(1 / max_elem), const_dtype), C, ftz)
    r = tiny_quotient_one(rules, r, C)
    zero = r == 0
    pos = ~zero
    if rule == "float32_exponent_field":  # only the exponent field of the float32 scale r is read (§4.2)
        field = (fp.round_to(r, fp.F32).view(np.uint32) >> np.uint32(23)) & np.uint32(0xFF)
        e = field.astype(np.int64) - 127
        return e, zero
    if rule == "rceil":
        e[pos] = ar.ceil_log2(r[pos])
    elif rule == "rceil_log2_via_ln_in_dtype":  # ceil of jnp.log2 under XLA's folding (block.md §3.3)
        e[pos] = np.ceil(fp.f64(ar.log2_via_ln(r[pos], C))).astype(np.int64)
    else:  # rceil_log2_float32
        e[pos] = np.ceil(ar.log2_float32(fp.round_to(r[pos], fp.F32))).astype(np.int64)
    return e, zero


def tiny_quotient_one(rules: ScaledRules, r: np.ndarray, C: np.dtype) -> np.ndarray:
    """tiny_quotient="one_below_sqrt_min_normal": a quotient r (a value of the compute dtype C) below
    fl_C(sqrt(min normal of C)) becomes 1 (block.md §4.2, §5.2): 2^-63 for float32 and bfloat16, 2^-7 for float16
    (both exact square roots). NaN stays NaN; "keep" returns r."""
    if rules.tiny_quotient == "keep":
        return r
    tiny = float(np.finfo(np.float16).tiny) if C == fp.F16 else float(fp.F32_MIN_NORMAL)
    thr = fp.round_to(np.float64(np.sqrt(tiny)), C)
    with np.errstate(invalid="ignore"):
        return np.where(fp.f64(r) < fp.f64(thr), np.ones((), r.dtype), r)


def min_normal_amax_exponent(rules: MXRules, f: BlockFormat, dtype: np.dtype, C: np.dtype | None, ftz: bool) -> int:
    """The scale exponent of a zero block under zero_block="min_normal_amax" (block.md §4.3): the rule applied to
    the stand-in 2^-126 held in the amax's dtype; where that dtype flushes it to 0 (float16), log2 0 = -Inf and
    the exponent is below every range (it clamps to -127)."""
    stand = np.full(1, fp.F32_MIN_NORMAL, dtype=dtype) if dtype.kind in "fV" else np.full(1, fp.F32_MIN_NORMAL)
    if not stand[0] > 0:
        return -(1 << 30)
    return int(_scale_exponent(rules, f, stand, C, ftz)[0][0])


ScaleExponent = Callable[[MXRules, BlockFormat, np.ndarray, "np.dtype | None", bool], tuple[np.ndarray, np.ndarray]]


@dataclass
class MXScales:
    """Per-block results of the scale steps (block.md §4.2-4.5), shared by the reference and the fast path.

    byte: the stored E8M0 byte; e_div: the exponent the elements are divided by (2^e_div); flushed: blocks whose
    elements become zeros of their sign first (flush_subnormal_blocks, §4.6); special: a divisor
    that overrides 2^e_div (NaN = none; 0 for MLX non-finite blocks, +Inf for JAX Inf blocks); scale_nan: byte
    255 with codes 0; folded: JAX's compile-time reciprocal of byte 0; zero: zero blocks; open_case: scales
    OCP leaves open; nan_blk / inf_blk / nonfinite: blocks holding NaN / Inf (no NaN) / either; nan_div: blocks
    whose elements are divided by NaN (nonfinite_divisor: every y is NaN; None: none)."""

    byte: np.ndarray
    e_div: np.ndarray
    flushed: np.ndarray
    special: np.ndarray
    scale_nan: np.ndarray
    folded: np.ndarray
    zero: np.ndarray
    open_case: np.ndarray
    nan_blk: np.ndarray
    inf_blk: np.ndarray
    nonfinite: np.ndarray
    nan_div: np.ndarray | None = None


def mx_block_scales(rules: MXRules, f: BlockFormat, amax: np.ndarray, nan_blk: np.ndarray, inf_blk: np.ndarray,
                    C: np.dtype | None, ftz: bool, scale_exponent: ScaleExponent | None = None) -> MXScales:
    """Scale byte and element divisor of each block from its amax (a value of the compute or input dtype; 0 for
    non-finite blocks) and its NaN / Inf flags (block.md §4.2-4.5). scale_exponent: a function equal to
    _scale_exponent (the fast path passes fast.fast_scale_exponent); None = _scale_exponent."""
    nb = amax.shape[0]
    nonfinite = nan_blk | inf_blk
    if rules.amax_floor:  # amax = max(amax, fl_C(amax_floor)) (block.md §4.2); non-finite blocks keep their policy
        amax = np.maximum(amax, np.asarray(rules.amax_floor, dtype=np.float64).astype(amax.dtype))

    # ---- scale exponent (§4.2-4.3) ----------------------------------------------------------------------
    e, zero = (scale_exponent or _scale_exponent)(rules, f, amax, C, ftz)
    # flush_subnormal_blocks (§4.6): the rule's amax exponent e + emax below the float32 normal range
    flushed = (e + f.element_emax < -126) & ~zero if rules.flush_subnormal_blocks else np.zeros(nb, dtype=bool)
    if rules.zero_block == "min_scale":
        e = np.where(zero, -E8M0_BIAS, e)
    elif rules.zero_block == "unit_scale":
        e = np.where(zero, 0, e)
    elif rules.zero_block == "min_normal_amax" and zero.any():
        e = np.where(zero, min_normal_amax_exponent(rules, f, amax.dtype, C, ftz), e)
    open_case = (e < -E8M0_BIAS) | (e > E8M0_BIAS) | zero  # OCP leaves these scales open

    # ---- range (§4.4) ---------------------------------------------------------------------------------
    scale_nan = np.zeros(nb, dtype=bool)
    if rules.scale_range == "wrap":
        byte = (e + E8M0_BIAS) & 0xFF
        e_div = e.copy()
    else:
        e_div = np.maximum(e, -E8M0_BIAS)
        if rules.scale_range == "clamp":
            e_div = np.minimum(e_div, E8M0_BIAS)
        else:  # clamp_nan
            scale_nan = e_div > E8M0_BIAS
            e_div = np.minimum(e_div, E8M0_BIAS)
        byte = e_div + E8M0_BIAS
    # a special divisor (float, per block) overrides 2^e_div: NaN = none
    special = np.full(nb, np.nan)

    # ---- non-finite blocks (§4.5) ------------------------------------------------------------------------
    pol = rules.nonfinite_block
    nan_div = np.zeros(nb, dtype=bool)
    if nonfinite.any():
        if pol == "nan_scale":
            scale_nan |= nonfinite
        elif pol == "nan255_inf_e128":
            scale_nan |= nan_blk
            # the float32 exponent field of Inf is 255 (E = 128): e = 128 - emax, clamped as usual
            e_inf = min(128 - f.element_emax, E8M0_BIAS)
            byte = np.where(inf_blk, e_inf + E8M0_BIAS, byte)
            e_div = np.where(inf_blk, e_inf, e_div)
        elif pol == "nan255_inf254":
            scale_nan |= nan_blk
            byte = np.where(inf_blk, 254, byte)
            e_div = np.where(inf_blk, E8M0_BIAS, e_div)
        elif pol == "zero_divisor":
            byte = np.where(nonfinite, 128 if C == fp.F32 else 0, byte)
            special = np.where(nonfinite, 0.0, special)
        elif pol == "exponent_bits_wrap":  # fl32(amax / M)'s exponent field: NaN 255 + 1 -> byte 0, Inf 255
            byte = np.where(nan_blk, 0, np.where(inf_blk, 255, byte))
            e_div = np.where(nan_blk, -E8M0_BIAS, e_div)
            special = np.where(inf_blk, np.inf, special)
        elif pol == "nan_wraps_inf_divisor":
            byte = np.where(nan_blk, 0, np.where(inf_blk, 255, byte))
            special = np.where(inf_blk, np.inf, special)
        elif pol == "nonfinite_divisor":  # the NaN / Inf amax carried through the rule: x / NaN, x / +Inf
            byte = np.where(nonfinite, 255, byte)
            special = np.where(inf_blk, np.inf, special)
            nan_div = nan_blk
        else:  # pragma: no cover - validated in BlockScheme
            raise AssertionError(pol)
    byte = np.where(scale_nan, 255, byte)

    # ---- tiny blocks: the divisor used for stored byte 0 (§4.4) -------------------------------------------
    folded = np.zeros(nb, dtype=bool)  # jax: XLA folds the constant 2^-127 (or 2^-15) instead of reading it
    if rules.scale_range != "wrap":
        b0 = (byte == 0) & np.isnan(special) & ~scale_nan
        if rules.byte0_divisor == "float32_min_normal":
            e_div = np.where(b0, -126, e_div)
        elif rules.byte0_divisor == "one":
            e_div = np.where(b0, 0, e_div)
        elif rules.byte0_divisor == "folded_stand_in":
            e_div = np.where(b0, -15 if C == fp.F16 else -E8M0_BIAS, e_div)
            folded = b0
    if rules.divisor_out_of_range == "nan_block" and C is not None:
        # §4.6: 2^e_div is 0 or Inf in C: x / 0 or x / Inf, then that times 0 or Inf again, is NaN
        d = fp.f64(fp.pow2(e_div, C))
        under = ((d == 0) | np.isinf(d)) & np.isnan(special) & ~scale_nan
        scale_nan |= under
        byte = np.where(under, 255, byte)
    return MXScales(byte, e_div, flushed, special, scale_nan, folded, zero, open_case, nan_blk, inf_blk, nonfinite,
                    nan_div)


def mx_row_flags(rules: MXRules, f: BlockFormat, sc: MXScales) -> tuple[np.ndarray, np.ndarray]:
    """(blocks whose every code is unspecified, blocks whose scale is unspecified) (block.md §4.5, §4.9)."""
    rows = sc.scale_nan.copy()
    scales_unspec = np.zeros(sc.byte.shape[0], dtype=bool)
    if rules.nonfinite_block == "nan_wraps_inf_divisor":
        # XLA:CPU's vectorized max reduction propagates a NaN or drops it depending on the array's shape: the
        # scale of a block holding NaN, and so its codes, are unspecified (block.md §4.5)
        rows |= sc.nan_blk
        scales_unspec |= sc.nan_blk
    if rules.unspecified_open_cases:
        rows |= (sc.open_case & ~sc.zero) | sc.nonfinite
        scales_unspec |= sc.open_case | sc.nonfinite
    return rows, scales_unspec


def mx_element_codes(rules: MXRules, f: BlockFormat, xc: np.ndarray, xf: np.ndarray, sc: MXScales,
                     C: np.dtype | None, ftz: bool,
                     rbits: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Element codes and their unspecified mask for blocks xc (the input rounded to the compute dtype; xf its
    float64 values, flushed with ftz) divided by their scales (block.md §4.6-4.7); rbits: xc's random integers
    of a stochastic rounding (block.md §13)."""
    nb, k = xc.shape
    e_div, special = sc.e_div, sc.special
    fmt = f.element
    policy = element_policy(rules, f)
    flat = np.ascontiguousarray(xc).reshape(-1)
    ses = f.element_scale_exp
    if C is None:
        shift = np.repeat(-e_div - ses, k)
        rflat = None if rbits is None else np.ascontiguousarray(rbits).reshape(-1)
        codes = encode_exact_shifted(flat, shift, fmt, policy, rflat).reshape(nb, k)
        codes = apply_zero_sign(rules, f, codes)
        if rules.zero_sign == "scaled_zero_positive" and isinstance(fmt, FloatFormat) and fmt.has_negative_zero:
            codes = np.where(xf == 0, np.where(codes == fmt.sign_mask, 0, codes), codes).astype(fmt.code_dtype)
        return codes, np.zeros((nb, k), dtype=bool)
    d = np.where(np.isnan(special), fp.pow2(e_div, None), special)
    d = fp.round_to(d, C)
    if rules.scale_arith == "divide":
        y = fp.div(xc, d[:, None], C, ftz)
    else:
        m = fp.div(1.0, d, C, ftz)
        if C == fp.F32:  # 1 / 2^-127 folded at compile time: 2^127, no flush
            m = np.where(sc.folded, fp.pow2(-e_div, C), m)
        y = fp.mul(xc, m[:, None], C, ftz)
    if sc.nan_div is not None and sc.nan_div.any():  # x / NaN (nonfinite_divisor, §4.5)
        y = np.where(sc.nan_div[:, None], fp.round_to(np.float64(np.nan), C), y)
    return encode_elements(rules, f, y, rbits)


def quantize_mx_reference(rules: MXRules, f: BlockFormat, xb: np.ndarray,
                          rbits: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The readable reference of quantize_mx_blocks: block.md §4.1 step by step, in float64 and the core;
    rbits: (n_blocks, k) random integers of a stochastic rounding (block.md §13)."""
    nb, k = xb.shape
    C = fp.resolve_compute_dtype(rules.compute_dtype, xb.dtype)
    ftz = rules.flush_subnormals
    if ftz and C is None:
        raise QrefError("flush_subnormals=True needs a compute dtype (compute_dtype='input' or 'float32', ...)")
    xc = xb if C is None else fp.round_to(xb, C)
    with np.errstate(invalid="ignore", over="ignore"):
        xf = fp.f64(xc)
    if ftz:
        xf = fp.flush(xf)
    nan_el = np.isnan(xf)
    inf_el = np.isinf(xf)
    nan_blk = nan_el.any(axis=1)
    inf_blk = inf_el.any(axis=1) & ~nan_blk
    absx = np.where(nan_el | inf_el, 0.0, np.abs(xf))
    amax64 = absx.max(axis=1) if k else np.zeros(nb)
    # amax is a value of the compute (or input) dtype: exact in float64; hand it back in that dtype
    amax = amax64.astype(xc.dtype) if xc.dtype.kind in "fV" else amax64
    sc = mx_block_scales(rules, f, amax, nan_blk, inf_blk, C, ftz)
    if sc.flushed.any():  # x * 0: zeros of the elements' signs (§4.6)
        with np.errstate(invalid="ignore"):
            xc = np.where(sc.flushed[:, None], fp.round_to(xf * 0.0, xc.dtype), xc)
        xf = fp.f64(xc)
    codes, unspec = mx_element_codes(rules, f, xc, xf, sc, C, ftz, rbits)
    codes = np.where(sc.scale_nan[:, None], 0, codes).astype(f.element.code_dtype)
    rows, scales_unspec = mx_row_flags(rules, f, sc)
    if rules.nan_block_float32 == "unspecified" and C == fp.F32:  # XLA:CPU's float32 max may drop a NaN (§4.5)
        rows = rows | sc.nan_blk
        scales_unspec = scales_unspec | sc.nan_blk
    if C == fp.BF16 and rules.byte0_divisor == "folded_stand_in" and rules.scale_arith == "reciprocal":
        rows = rows | sc.folded  # XLA:CPU: 1/0 = +Inf or the folded float32 2^127, by fusion (block.md §4.4)
    unspec = unspec | rows[:, None]
    return {"codes": codes, "scales": sc.byte.astype(np.uint8), "unspecified": unspec,
            "scales_unspecified": scales_unspec}


def dequantize_mx_reference(rules: MXRules, f: BlockFormat, codes: np.ndarray, scales: np.ndarray, dtype: np.dtype
                            ) -> np.ndarray:
    """Values of (n_blocks, k) codes with E8M0 scale bytes (n_blocks,) as ``dtype`` (block.md §4.8).

    dequant="exact": P_i * 2^element_scale_exp * 2^(byte - 127) rounded once to dtype (byte 255 = NaN);
    dequant="in_dtype": s = fl_dtype(2^(byte - 127)) (byte 255: NaN, or 2^128 with dequant_nan_scale="power"),
    then fl_dtype(decode(P_i, dtype) * s) (MLX, torchao); with flush_subnormals the product has XLA:CPU's DAZ/FTZ
    (float32-subnormal operands and results are zeros of their sign: qwix)."""
    nb, k = codes.shape
    fmt = f.element
    dt, tgt = target_format(dtype)
    b = scales.astype(np.int64)
    if rules.dequant == "exact":
        ex = exact_parts(codes.reshape(-1).astype(U64), fmt)
        shift = np.repeat(b - E8M0_BIAS, k) + f.element_scale_exp
        cls = np.where(np.repeat(b == 255, k), NAN, ex.cls).astype(np.int8)
        ex = Exact(cls, ex.neg, ex.sig, ex.exp + shift, ex.subnormal)
        pol = CastPolicy(rounding="nearest_even", overflow="inf", nan="keep_sign").resolve(tgt)
        bits = encode_exact(ex, tgt, pol).astype(tgt.code_dtype)
        return bits.view(dt).reshape(nb, k)
    sv = fp.pow2(b - E8M0_BIAS, None)
    if rules.dequant_nan_scale == "nan":
        sv = np.where(b == 255, np.nan, sv)
    sv = fp.round_to(sv, dt)
    vals = decode(codes, fmt, dtype=dt)
    ftz = rules.flush_subnormals  # XLA:CPU: DAZ on the scale (2^-127 in float32 / bfloat16 reads as 0), FTZ
    if f.element_scale_exp:
        vals = fp.mul(vals, 2.0**f.element_scale_exp, dt, ftz)
    return fp.mul(vals, sv[:, None], dt, ftz)


__all__ = [
    "E8M0_BIAS",
    "MXScales",
    "ScaleExponent",
    "apply_zero_sign",
    "dequantize_mx_reference",
    "element_policy",
    "encode_elements",
    "encode_exact_shifted",
    "integer_step_values",
    "lut_argmin",
    "min_normal_amax_exponent",
    "mx_block_scales",
    "mx_element_codes",
    "mx_row_flags",
    "quantize_mx_reference",
    "stochastic_offset",
    "tiny_quotient_one",
]

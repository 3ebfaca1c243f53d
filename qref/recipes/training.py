"""Training recipes (spec: docs/spec/recipes.md §8-§10).

- ``HybridRecipe``: E4M3 for activations and weights, E5M2 for gradients, each tensor with its own delayed
  scale (flax.linen.fp8_ops: in_qdq / out_qdq / in_q).
- ``dense_fp8_step``: a numpy reference of one forward and backward step of ``nn.Dense(dot_general_cls=
  Fp8DirectDotGeneralOp)`` (flax 0.12.8): outputs, gradients and the new meta variables, with rigorous
  tolerances where the dots' accumulation order is implementation-defined (zero: bit exact).
- ``quantize_blockwise`` / ``dequantize_blockwise`` / ``adam8bit_step``: 8-bit blockwise optimizer states with
  bitsandbytes' dynamic maps (signed for the first moment, unsigned for the second; blocks of 256).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.arith import add_round, f64, mul_round, np_dtype, round_values
from ..core.decode import decode
from ..errors import QrefError, check_choice
from ..profiles import profiles
from ..profiles.recipe import HybridRules
from ..schemes import scheme
from ..schemes.base import QArray
from ..tables import dynamic_map
from .exact import acc_format
from .ops import Accumulation, MatmulResult, exact_matmul
from .scaling import DIVISIONS, DelayedScaling, ScalingState, scaled_dequantize, scaled_quantize

META_NAMES = ("input", "kernel", "output_grad")
CAST_SCALES = ("updated", "stored")
DOT_OPERANDS = ("codes", "dequantized")


# ---------------------------------------------------------------------------------------------------------
# the hybrid recipe (recipes.md §8)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HybridRecipe(HybridRules):
    """E4M3 forward / E5M2 gradients with separate delayed scales (recipes.md §8): the fields of HybridRules
    (qref/profiles/recipe.py; defaults: Flax 0.12.8 eager on XLA:CPU) and the dots' accumulation model.

    forward_format: inputs and kernels (default "float8_e4m3fn"). grad_format: output gradients (default
    "float8_e5m2"). history_length, amax_compute, margin: the DelayedScaling of every tensor (defaults 1024,
    "max", 0). compute_dtype: the dtype of the scaled casts and of the dots' outputs (Flax: the kernel's dtype;
    default "float32"). division: "divide" (eager JAX) or "reciprocal" (under jax.jit, XLA rewrites x / s into
    x * (1 / s)) (default "divide"). ftz: XLA:CPU flush-to-zero in the scale and cast arithmetic (default True).
    fuse_bias: the Dense output is fma(dot, s_x s_k, bias) with one rounding instead of fl(fl(dot * s) + bias):
        XLA:CPU contracts the multiply-add of its fused elementwise kernel under jit on hosts with FMA (default
        False: eager JAX).
    cast_scale: "updated" (Flax: each tensor is cast with the scale just computed from its history) or "stored"
        (Keras: cast with the stored scale; the computed scale is stored for the next step) (recipes.md §14).
    dot_operands: "codes" (Flax: dot of the fp8 codes, the product times fl(s_a s_b)) or "dequantized" (Keras:
        dot of the values fl(decode(q) s) in compute_dtype).
    bias_rounding: None, or a float dtype the bias is rounded through before the add (Keras: "bfloat16").
    accumulation: the dots' accumulation model (default: any order in compute_dtype, with ftz).
    """

    accumulation: Accumulation | None = None

    def __post_init__(self) -> None:
        check_choice("division", self.division, DIVISIONS)
        check_choice("cast scale", self.cast_scale, CAST_SCALES)
        check_choice("dot operands", self.dot_operands, DOT_OPERANDS)
        if self.bias_rounding is not None:
            acc_format(self.bias_rounding)
        acc_format(self.compute_dtype)
        self.scaling("forward")  # validates the scaling fields

    @property
    def acc(self) -> Accumulation:
        return self.accumulation if self.accumulation is not None else Accumulation(
            "any", self.compute_dtype, ftz=self.ftz)

    def scaling(self, which: str) -> DelayedScaling:
        """The DelayedScaling of "forward" tensors (inputs, kernels) or of "grad" tensors."""
        fmt = self.forward_format if which == "forward" else self.grad_format
        return DelayedScaling(fmt=fmt, history_length=self.history_length, amax_compute=self.amax_compute,
                              margin=self.margin, formula="flax", dtype="float32", ftz=self.ftz)

    def qdq_forward(self, x: object, state: ScalingState) -> tuple[np.ndarray, ScalingState]:
        """Flax in_qdq forward: update the scale from the history, push amax(x), qdq x (E4M3). The backward of
        in_qdq is the identity (straight-through)."""
        return self._qdq(x, state, self.scaling("forward"))

    def qdq_grad(self, g: object, state: ScalingState) -> tuple[np.ndarray, ScalingState]:
        """Flax out_qdq backward: the same update, then qdq of the incoming gradient (E5M2). Its forward is the
        identity."""
        return self._qdq(g, state, self.scaling("grad"))

    def _qdq(self, x: object, state: ScalingState, ds: DelayedScaling) -> tuple[np.ndarray, ScalingState]:
        xv = np.asarray(x)
        s_new, new = ds.update(state, xv)
        s = s_new if self.cast_scale == "updated" else state.scale
        codes = scaled_quantize(xv, s, ds.fmt, compute_dtype=self.compute_dtype, division=self.division,
                                ftz=self.ftz)
        dt = xv.dtype.name if xv.dtype.kind in "fV" else "float64"
        return scaled_dequantize(codes, ds.fmt, s, dtype=dt, ftz=self.ftz), new


# built from the recipe profile records (qref/profiles/recipe.py), the one place their values live
PRESETS: dict[str, HybridRecipe] = {
    name: HybridRecipe(**dataclasses.asdict(p.rules)) for name, p in profiles("recipe").items()
    if isinstance(p.rules, HybridRules)
}


@dataclass(frozen=True)
class Fp8DotState:
    """The six meta variables of one Fp8DotGeneral (Flax collection '_overwrite_with_gradient')."""

    input: ScalingState
    kernel: ScalingState
    output_grad: ScalingState

    @staticmethod
    def init(recipe: HybridRecipe) -> Fp8DotState:
        fw, gr = recipe.scaling("forward"), recipe.scaling("grad")
        return Fp8DotState(fw.init(), fw.init(), gr.init())

    @staticmethod
    def from_flax(meta: Mapping[str, Any]) -> Fp8DotState:
        """From {'input_scale', 'input_amax_history', 'kernel_scale', ...} arrays (the module's variables)."""
        try:
            return Fp8DotState(*(ScalingState(np.asarray(meta[f"{n}_scale"], np.float32).reshape(1),
                                              np.asarray(meta[f"{n}_amax_history"], np.float32).reshape(-1))
                                 for n in META_NAMES))
        except KeyError as e:
            raise QrefError(f"missing Fp8 meta variable {e.args[0]!r}; expected input_/kernel_/output_grad_ "
                            "scale and amax_history") from None

    def to_flax(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for n in META_NAMES:
            st: ScalingState = getattr(self, n)
            out[f"{n}_scale"] = np.array(st.scale)
            out[f"{n}_amax_history"] = np.array(st.history)
        return out


# ---------------------------------------------------------------------------------------------------------
# Dense under Fp8DirectDotGeneralOp (recipes.md §9)
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DenseStep:
    """One forward + backward step of the Dense reference (recipes.md §9).

    y, grad_x, grad_kernel, grad_bias: values in the compute dtype. *_tol: float64 arrays; a conforming
    backend's value differs from the reference's by at most tol (0: bit for bit). state: the new meta
    variables (what Flax returns as the '_overwrite_with_gradient' gradients). scales: (s_x, s_k, s_g) used in
    this step. codes: (q_x, q_k, q_g). dots: the MatmulResults of the three dots and of the bias reduction."""

    y: np.ndarray
    grad_x: np.ndarray
    grad_kernel: np.ndarray
    grad_bias: np.ndarray | None
    y_tol: np.ndarray
    grad_x_tol: np.ndarray
    grad_kernel_tol: np.ndarray
    grad_bias_tol: np.ndarray | None
    state: Fp8DotState
    scales: tuple[np.ndarray, np.ndarray, np.ndarray]
    codes: tuple[np.ndarray, np.ndarray, np.ndarray]
    dots: dict[str, MatmulResult] = field(default_factory=dict)

    @property
    def bit_exact(self) -> bool:
        """True when every tolerance is zero: any conforming backend reproduces every value bit for bit."""
        tols = [self.y_tol, self.grad_x_tol, self.grad_kernel_tol]
        if self.grad_bias_tol is not None:
            tols.append(self.grad_bias_tol)
        return all(not np.any(t) for t in tols)


def _up(v: np.ndarray) -> np.ndarray:
    return np.where(v > 0, np.nextafter(v, np.inf), v)


def _tol_from(beta: np.ndarray, value: np.ndarray, u: float, bias: bool) -> np.ndarray:
    """Tolerance between two conforming computations (recipes.md §9.3). beta bounds |z - z_exact| of the
    value fed to the last step; with a bias, the last step rounds z + b: each computation lies within
    beta' = beta + u (|value| + 2 beta) of the exact result, so two of them differ by at most 2 beta'.
    Without a bias both lie within beta. 0 when beta = 0 (deterministic)."""
    if not bias:
        return np.where(beta == 0, 0.0, _up(2 * beta))
    b2 = _up(beta + _up(u * _up(np.abs(f64(value)) + 2 * beta)))
    return np.where(beta == 0, 0.0, _up(2 * b2))


def dense_fp8_step(x: object, kernel: object, bias: object, g: object, state: Fp8DotState,
                   recipe: HybridRecipe | None = None) -> DenseStep:
    """Forward and backward of nn.Dense(features=N, dot_general_cls=Fp8DirectDotGeneralOp) (flax 0.12.8,
    fp8_ops.fp8_scaled_dot_general), recipes.md §9:

        s_x, h_x = update(input meta, x);   q_x = e4m3(clip(x / s_x))
        s_k, h_k = update(kernel meta, k);  q_k = e4m3(clip(k / s_k))
        y = fl(fl(dot(q_x, q_k) * fl(s_x s_k)) + bias)      (fuse_bias: fma(dot(q_x, q_k), fl(s_x s_k), bias))
        s_g, h_g = update(output_grad meta, g);  q_g = e5m2(clip(g / s_g))
        grad_x = fl(dot(q_g, q_k^T) * fl(s_k s_g));  grad_k = fl(dot(q_x^T, q_g) * fl(s_x s_g))
        grad_bias = sum of g over the batch axes

    x: (..., K); kernel: (K, N); bias: (N,) or None; g: dL/dy, shape (..., N). Everything is computed in the
    recipe's compute dtype (x is cast to it first, as Flax casts inputs to the kernel's dtype).

    With cast_scale "stored" each cast uses the state's scale (the updated scale goes to the new state only);
    with dot_operands "dequantized" (keras 3.15, recipes.md §14) the dots run on v = fl(decode(q) s):
    y = fl(dot(v_x, v_k)) [+ bias], grad_x = fl(dot(v_g, v_k^T)), grad_k = fl(dot(v_x^T, v_g)); with
    bias_rounding the bias is rounded through that dtype first, and so is grad_bias (the backward of the round
    trip)."""
    rc = recipe if recipe is not None else HybridRecipe()
    cd = rc.compute_dtype
    cfmt = acc_format(cd)
    ndt = np_dtype(cfmt)
    xv = round_values(f64(x), cfmt).astype(ndt)
    kv = np.asarray(kernel)
    if kv.ndim != 2 or xv.shape[-1] != kv.shape[0]:
        raise QrefError(f"x (..., K) and kernel (K, N) do not match: {xv.shape} and {kv.shape}")
    kv = round_values(f64(kv), cfmt).astype(ndt)
    K, N = kv.shape
    lead = xv.shape[:-1]
    x2 = xv.reshape(-1, K)
    gv = round_values(f64(g), cfmt).astype(ndt)
    if gv.shape != (*lead, N):
        raise QrefError(f"g must have the output's shape {(*lead, N)}, got {gv.shape}")
    g2 = gv.reshape(-1, N)
    fw, gr = rc.scaling("forward"), rc.scaling("grad")
    ftz = rc.ftz
    acc = dataclasses.replace(rc.acc, dtype=cd)
    f32 = acc_format("float32")

    stored = rc.cast_scale == "stored"
    s_x, st_x = fw.update(state.input, x2)
    s_k, st_k = fw.update(state.kernel, kv)
    if stored:
        s_x, s_k = state.input.scale, state.kernel.scale
    q_x = scaled_quantize(x2, s_x, fw.fmt, compute_dtype=cd, division=rc.division, ftz=ftz)
    q_k = scaled_quantize(kv, s_k, fw.fmt, compute_dtype=cd, division=rc.division, ftz=ftz)
    deq = rc.dot_operands == "dequantized"
    if deq:
        vx = f64(scaled_dequantize(q_x, fw.fmt, s_x, dtype=cd, ftz=ftz))
        vk = f64(scaled_dequantize(q_k, fw.fmt, s_k, dtype=cd, ftz=ftz))
    else:
        vx = _decode(q_x, fw.fmt)
        vk = _decode(q_k, fw.fmt)

    def scale_prod(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        if deq:
            return None
        return round_values(round_values(f64(a) * f64(b), f32, ftz=ftz), cfmt, ftz=ftz).reshape(())

    s_y = scale_prod(s_x, s_k)
    r_y = exact_matmul(vx, vk, accumulation=acc, out_dtype=cd, post_scale=s_y)
    u = 2.0 ** -cfmt.precision
    bv = None
    if bias is not None:
        bv = round_values(f64(bias), cfmt)
        if bv.shape != (N,):
            raise QrefError(f"bias must have shape ({N},), got {bv.shape}")
        if rc.bias_rounding is not None:
            bv = round_values(bv, acc_format(rc.bias_rounding))
    if bias is not None and rc.fuse_bias and not deq:
        r_acc = exact_matmul(vx, vk, accumulation=acc, out_dtype=cd)
        with np.errstate(invalid="ignore", over="ignore"):
            y = add_round(f64(r_acc.value) * f64(s_y), bv, cfmt, ftz=ftz)  # fma: one rounding
        beta = _up(np.abs(f64(s_y)) * r_acc.bound)
        y_tol = _tol_from(beta, y, u, bias=True)
        dots_y = r_acc
    else:
        y = r_y.value.astype(np.float64)
        if bv is not None:
            y = round_values(y + bv, cfmt, ftz=ftz)
        y_tol = _tol_from(r_y.bound, y, u, bias=bv is not None)
        dots_y = r_y

    s_g, st_g = gr.update(state.output_grad, g2)
    if stored:
        s_g = state.output_grad.scale
    q_g = scaled_quantize(g2, s_g, gr.fmt, compute_dtype=cd, division=rc.division, ftz=ftz)
    vg = f64(scaled_dequantize(q_g, gr.fmt, s_g, dtype=cd, ftz=ftz)) if deq else _decode(q_g, gr.fmt)
    r_gx = exact_matmul(vg, vk.T, accumulation=acc, out_dtype=cd, post_scale=scale_prod(s_k, s_g))
    r_gk = exact_matmul(vx.T, vg, accumulation=acc, out_dtype=cd, post_scale=scale_prod(s_x, s_g))
    dots = {"y": dots_y, "grad_x": r_gx, "grad_kernel": r_gk}
    gb = gb_tol = None
    if bias is not None:
        r_gb = exact_matmul(np.ones((1, g2.shape[0])), f64(g2), accumulation=acc, out_dtype=cd)
        dots["grad_bias"] = r_gb
        gb = r_gb.value.reshape(N)
        gb_tol = _tol_from(r_gb.bound, gb, u, bias=False).reshape(N)
        if rc.bias_rounding is not None:  # the backward of the round trip rounds the cotangent the same way
            gb = round_values(f64(gb), acc_format(rc.bias_rounding)).astype(ndt)
            gb_tol = np.where(gb_tol == 0, 0.0, _up(gb_tol + np.abs(f64(gb)) * 2.0 ** -acc_format(
                rc.bias_rounding).precision))
    return DenseStep(
        y=y.astype(ndt).reshape(*lead, N),
        grad_x=r_gx.value.reshape(*lead, K),
        grad_kernel=r_gk.value,
        grad_bias=gb,
        y_tol=y_tol.reshape(*lead, N),
        grad_x_tol=_tol_from(r_gx.bound, r_gx.value, u, bias=False).reshape(*lead, K),
        grad_kernel_tol=_tol_from(r_gk.bound, r_gk.value, u, bias=False),
        grad_bias_tol=gb_tol,
        state=Fp8DotState(st_x, st_k, st_g),
        scales=(s_x, s_k, s_g),
        codes=(q_x, q_k, q_g),
        dots=dots,
    )


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    return decode(codes, fmt, dtype=np.float64)


def sgd(param: object, grad: object, lr: float, dtype: str = "float32") -> np.ndarray:
    """fl(p - fl(lr * g)) in ``dtype`` (lr rounded to dtype first): plain SGD, as p - lr * g in JAX."""
    fmt = acc_format(dtype)
    lr_d = round_values(np.float64(lr), fmt)
    step = mul_round(lr_d, f64(grad), fmt)
    return round_values(f64(param) - step, fmt).astype(np_dtype(fmt))


# ---------------------------------------------------------------------------------------------------------
# 8-bit blockwise optimizer states (recipes.md §10)
# ---------------------------------------------------------------------------------------------------------
OPT_BLOCK = 256


def _state_scheme(signed: bool, block_size: int) -> Any:
    """bitsandbytes' CPU quantize_blockwise with the signed or unsigned dynamic map (qref lookup scheme)."""
    base = scheme("dynamic8", block_size=block_size, profile="bitsandbytes")
    if signed:
        return base
    return dataclasses.replace(base, name="lut", table=dynamic_map(signed=False))


def quantize_blockwise(x: object, *, signed: bool = True, block_size: int = OPT_BLOCK) -> QArray:
    """8-bit codes of x in blocks of ``block_size`` (default 256, bitsandbytes' optimizer block) with the
    dynamic map (signed=True: create_dynamic_map(signed=True), the first moment; False: the unsigned map, the
    second moment). absmax per block in ``scales``; bitsandbytes 0.50.2 CPU semantics (lut.md)."""
    return _state_scheme(signed, block_size).quantize(np.asarray(x, dtype=np.float32))


def dequantize_blockwise(q: QArray) -> np.ndarray:
    """float32 values table[code] * absmax (one float32 rounding), bitsandbytes' dequantize_blockwise."""
    return np.asarray(q.dequantize(np.float32), dtype=np.float32)


@dataclass(frozen=True)
class AdamState8bit:
    """Adam moments stored as 8-bit blockwise QArrays (m: signed map, v: unsigned map) and the step count."""

    m: QArray
    v: QArray
    step: int = 0

    @staticmethod
    def init(param: object, block_size: int = OPT_BLOCK) -> AdamState8bit:
        """Zero moments: codes 0 with absmax 0 (bitsandbytes initializes both to zeros)."""
        p = np.asarray(param)
        nb = -(-p.size // block_size)
        qm = quantize_blockwise(np.zeros(p.shape, np.float32), signed=True, block_size=block_size)
        qv = quantize_blockwise(np.zeros(p.shape, np.float32), signed=False, block_size=block_size)
        zc = np.zeros(p.shape, dtype=qm.codes.dtype)
        za = np.zeros(nb, dtype=np.float32)
        return AdamState8bit(dataclasses.replace(qm, codes=zc, scales=za),
                             dataclasses.replace(qv, codes=zc.copy(), scales=za.copy()), 0)


def adam8bit_step(param: object, grad: object, state: AdamState8bit, *, lr: float = 1e-3, beta1: float = 0.9,
                  beta2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.0, moment_fma: bool = False,
                  sqrt: Callable[[np.ndarray], np.ndarray] | None = None) -> tuple[np.ndarray, AdamState8bit]:
    """One Adam step with 8-bit blockwise states, in float32 (recipes.md §10.2; the op sequence of
    bitsandbytes 0.50.2's CPU optimizer_update_8bit_blockwise, each step one float32 rounding):

        m = deq(m8); v = deq(v8)
        m = fl(fl(m * b1) + fl((1 - b1) * g))         moment_fma: fma(1 - b1, g, fl(m * b1))
        v = fl(fl(v * b2) + fl(fl((1 - b2) * g) * g))  moment_fma: fma(fl((1 - b2) * g), g, fl(v * b2))
        c1 = 1 - b1^t;  c2 = sqrt(1 - b2^t)                       (float64 Python scalars)
        denom = fl(fl(sqrt(v) / c2) + eps)
        p = fl(p * (1 - lr wd)) if wd > 0;   p = fl(p + fl(fl((-lr / c1) * m) / denom))
        m8 = q(m, signed map); v8 = q(v, unsigned map)   (blocks of the state's block size, 256)

    Scalars (b1, 1 - b1, ..., -lr / c1) are computed in float64 and rounded to float32 where they meet a
    tensor. sqrt: the float32 square root (default None: correctly rounded; torch's CPU sqrt is faithful, within
    one ulp, not correctly rounded, recipes.md §10.3). moment_fma: fuse the moment updates' last multiply-add
    (torch's vectorized add_(alpha=) and addcmul_ kernels do; default False). Returns (new param, new state)."""
    p = np.asarray(param, dtype=np.float32)
    gv = np.asarray(grad, dtype=np.float32)
    if p.shape != gv.shape:
        raise QrefError(f"param and grad shapes differ: {p.shape} and {gv.shape}")
    f32 = acc_format("float32")
    t = state.step + 1
    m = f64(dequantize_blockwise(state.m))
    v = f64(dequantize_blockwise(state.v))
    g = f64(gv)

    def r(a: np.ndarray) -> np.ndarray:
        return round_values(a, f32)

    def sc(c: float) -> float:
        return float(np.float32(c))

    if moment_fma:  # products are exact in float64 (24 + 24 bits); add_round rounds the sum once
        m = add_round(sc(1.0 - beta1) * g, r(m * sc(beta1)), f32)
        v = add_round(r(sc(1.0 - beta2) * g) * g, r(v * sc(beta2)), f32)
    else:
        m = r(r(m * sc(beta1)) + r(sc(1.0 - beta1) * g))
        v = r(r(v * sc(beta2)) + r(r(sc(1.0 - beta2) * g) * g))
    c1 = 1.0 - beta1**t
    c2 = math.sqrt(1.0 - beta2**t)
    root = f64(np.sqrt(v.astype(np.float32)) if sqrt is None else np.asarray(sqrt(v.astype(np.float32)),
                                                                              dtype=np.float32))
    denom = r(r(root / sc(c2)) + sc(eps))
    pv = f64(p)
    if weight_decay > 0.0:
        pv = r(pv * sc(1.0 - lr * weight_decay))
    pv = r(pv + r(r(sc(-lr / c1) * m) / denom))
    block = int(state.m.scheme.block_size)  # type: ignore[attr-defined]
    qm = quantize_blockwise(m.astype(np.float32), signed=True, block_size=block)
    qv = quantize_blockwise(v.astype(np.float32), signed=False, block_size=block)
    return pv.astype(np.float32), AdamState8bit(qm, qv, t)


__all__ = ["META_NAMES", "OPT_BLOCK", "PRESETS", "AdamState8bit", "DenseStep", "Fp8DotState", "HybridRecipe",
           "adam8bit_step", "dense_fp8_step", "dequantize_blockwise", "quantize_blockwise", "sgd"]

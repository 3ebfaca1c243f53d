"""Block-scaled schemes: MX (OCP MX v1.0), NVFP4 and MLX affine groups (spec: docs/spec/block.md).

``qref.scheme("mxfp4", block_size=32, profile="ocp")``, ``qref.scheme("nvfp4", profile="mlx")``,
``qref.scheme("mlx_affine", bits=4, group_size=64)`` or any element format with a block size
(``qref.scheme("float8_e4m3fn", block_size=32, scale_format="float8_e8m0fnu")``) build one frozen
``BlockScheme``. Every behaviour the real systems disagree on is a separate field (block.md §2); a profile
(``ocp``, ``microxcaling``, ``torchao_floor``, ``torchao_rceil``, ``mlx``, ``jax``, ``nvidia``) is a record of
field values and the fields can be overridden one by one: ``qref.scheme("mxfp8_e4m3", profile="jax",
scale_arith="divide")``.

``scheme.quantize(x, axis=-1)`` returns a QArray: ``codes`` (one unsigned element code per element, unpacked),
``scales`` (E8M0 bytes for MX, E4M3 bytes for NVFP4, floats in the input dtype for affine), ``biases``
(affine), ``global_scale`` (NVFP4 two-level), ``unspecified`` (elements whose code the spec or the system
leaves undefined) and ``meta["scales_unspecified"]``.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from ...core.encode import stochastic_random_bits
from ...core.exact import as_source_array
from ...core.parallel import pieces, run_chunks, thread_limit
from ...errors import QrefError, unknown_name
from ...formats import FloatFormat, Format, IntFormat, get_format
from ...formats.block import BLOCK_KINDS, NAMED_SCHEMES, BlockFormat
from ...formats.policy import CastPolicy
from ...profiles import Profile, get_profile, profiles
from ...profiles.block import CHOICES, RULES_OF_KIND, FloatScaleRules, KindRules, MXRules, rules_of
from ...validators import check_alloc
from ..base import QArray, Scheme, normalize_axis, register_family
from . import affine, mx, nvfp4

KINDS = BLOCK_KINDS
DEFAULT_PROFILE = {"mx": "ocp", "float_scale": "ocp", "affine": "mlx", "nvfp4": "nvidia"}

# the keys of a block scheme's spec, in order, with the value a kind without that rule writes (the committed
# suite's specs: every rule field of every kind; stochastic_bits, amax_floor, global_scale_granularity,
# tiny_quotient and nan_block_float32 are left out at their defaults, as before those fields existed)
_RULE_DEFAULTS: dict[str, Any] = {**FloatScaleRules().values(), **MXRules().values()}
SPEC_KEYS = ("name", "element", "scale_format", "block_size", "kind", "profile", "element_scale_exp",
             "scale_rule", "zero_block", "scale_range", "nonfinite_block", "byte0_divisor", "global_scale_rule",
             "amax_nan", "rounding", "overflow", "nan", "stochastic_bits", "zero_sign", "out_of_range",
             "compute_dtype", "scale_arith", "quotient_arith", "flush_subnormals", "flush_subnormal_blocks",
             "divisor_out_of_range", "element_exponent", "round_arith", "dequant", "dequant_nan_scale", "pad",
             "min_ndim", "unspecified_open_cases", "amax_floor", "global_scale_granularity", "tiny_quotient",
             "nan_block_float32")
RULE_FIELDS = tuple(k for k in SPEC_KEYS if k in _RULE_DEFAULTS)
_SPEC_OMIT = {"stochastic_bits": None, "amax_floor": 0.0, "global_scale_granularity": "tensor", "tiny_quotient": "keep",
              "nan_block_float32": "propagate"}


def read_through(path: str, doc: str = "") -> Any:
    """A read-only property whose value is the attribute ``path`` (dotted) of the object: ``read_through(
    "format.name")`` reads ``self.format.name``. For the parts a scheme takes from its format or its rules."""
    names = path.split(".")

    def get(self: object) -> Any:
        for n in names:
            self = getattr(self, n)
        return self

    return property(get, doc=doc or f"``{path}``")


@dataclass(frozen=True)
class BlockScheme(Scheme):
    """One block-scaled quantization scheme (block.md §2): a block format and the rules of its kind.

    format: the BlockFormat (qref.formats.block): name, element format, block_size, scale format,
        element_scale_exp; read through the properties name, element, scale_format, block_size,
        element_scale_exp.
    rules: the kind's rules record of qref.profiles.block (block.md §2 documents each value): MXRules (kind
        "mx": E8M0 scales), FloatScaleRules ("float_scale": NVFP4 and other float scale formats) or AffineRules
        ("affine": MLX affine groups). The records check their values; ``scheme.X`` reads ``scheme.rules.X``
        for every rule field X (a rule of another kind: its default, as the spec writes it).
    profile: the profile the rules came from (None when built by hand).

    Constraints between the format and the rules (block.md §2): MX takes scale_format float8_e8m0fnu;
    float_scale a float scale format with mantissa bits and float elements; affine unsigned 1..8-bit codes and
    no scale format; the rounding must suit the element format (CastPolicy); global_scale_granularity
    "tile_64" needs a block_size that divides 64.
    """

    format: BlockFormat
    rules: KindRules
    profile: str | None = None
    family = "block"

    def __post_init__(self) -> None:
        fmt, r = self.format, self.rules
        if not isinstance(fmt, BlockFormat):
            raise QrefError(f"BlockScheme.format must be a BlockFormat, got {type(fmt).__name__}")
        if type(r) not in RULES_OF_KIND.values():
            raise QrefError(f"BlockScheme.rules must be MXRules, FloatScaleRules or AffineRules, got "
                            f"{type(r).__name__}")
        el, sf = fmt.element, fmt.scale
        CastPolicy(rounding=r.rounding, overflow=getattr(r, "overflow", "saturate"), nan=getattr(r, "nan", None),
                   stochastic_bits=r.stochastic_bits).resolve(el)
        if isinstance(r, MXRules):
            if sf is None or sf.name != "float8_e8m0fnu":
                raise QrefError("MX blocks take scale_format='float8_e8m0fnu' (OCP MX v1.0 §5.4); for other "
                                "float scale formats pass a format with mantissa bits (float_scale kind)")
        elif isinstance(r, FloatScaleRules):
            if not isinstance(sf, FloatFormat) or sf.mantissa_bits == 0:
                raise QrefError("float-scaled blocks need a scale format with mantissa bits (e.g. "
                                "float8_e4m3fn); E8M0 scales are the MX kind")
            if not isinstance(el, FloatFormat):
                raise QrefError("float-scaled blocks take float elements")
            if r.global_scale_granularity == "tile_64" and 64 % fmt.block_size:
                raise QrefError(f"global_scale_granularity='tile_64' groups whole blocks: block_size must divide "
                                f"64, got {fmt.block_size}")
        else:
            if not (isinstance(el, IntFormat) and not el.signed and 1 <= el.bits <= 8):
                raise QrefError("affine groups take unsigned 1..8-bit codes (bits=1..8)")
            if sf is not None:
                raise QrefError("affine groups store float scales in the input dtype: scale_format must be None")

    def __getattr__(self, name: str) -> Any:
        """Read access to the rules: ``scheme.scale_rule`` is ``scheme.rules.scale_rule``; a rule of another kind
        reads as its default, the value the spec writes for it (``nvfp4.scale_rule == "floor"``)."""
        if name.startswith("_") or name in ("format", "rules", "profile"):
            raise AttributeError(name)
        rules = self.__dict__.get("rules")
        if rules is not None and name in _RULE_DEFAULTS:
            return getattr(rules, name, _RULE_DEFAULTS[name])
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    # ---- the format's parts (BlockFormat) and the rules' kind ----------------------------------------------
    name = read_through("format.name", "The block format's name (str).")
    element = read_through("format.element", "The element Format.")
    scale_format = read_through("format.scale", "The scale FloatFormat (None: affine scales in the input dtype).")
    block_size = read_through("format.block_size", "Elements per block (int).")
    element_scale_exp = read_through("format.element_scale_exp", "Exponent of the element format's scaling (int).")
    kind = read_through("rules.kind", '"mx", "float_scale" or "affine": the kind of the rules record.')
    stochastic = read_through("rules.stochastic", "True for the stochastic rounding modes (block.md §13).")
    element_max = read_through("format.element_max", "Largest element magnitude (a Fraction: as a real value, "
                               "element_scale_exp included).")
    element_emax = read_through("format.element_emax", "floor(log2(element_max)): OCP's 'largest power of two "
                                "representable in the element data type'.")
    element_mantissa_bits = read_through("format.element_mantissa_bits", "Mantissa bits of the element format.")
    bits = read_through("format.bits", "Bits per element code (int).")

    # ---- quantize / dequantize ----------------------------------------------------------------------------
    def _blocks(self, arr: np.ndarray, axis: int) -> tuple[np.ndarray, int, int, tuple[int, ...]]:
        if arr.ndim < max(self.rules.min_ndim, 1):
            raise QrefError(f"{self.name} ({self.profile}) needs an input with at least {max(self.rules.min_ndim, 1)} "
                            f"dimension(s), got shape {arr.shape}"
                            + (" (MLX quantizes matrices: reshape to (1, n))" if self.rules.min_ndim > 1 else ""))
        ax = normalize_axis(axis, arr.ndim)
        moved = np.moveaxis(arr, ax, -1)
        L = moved.shape[-1]
        k = self.block_size
        pad = (-L) % k
        if pad and self.rules.pad == "error":
            raise QrefError(
                f"the length {L} along axis {axis} is not a multiple of block_size {k}, and profile "
                f"{self.profile!r} does not pad (the real system rejects it); pad the input to a multiple of {k} "
                "or pass pad='zero' (short blocks padded with +0, block.md §7)"
            )
        check_alloc(math.prod(moved.shape[:-1]) * (L + pad), 8, f"{self.name} with block_size {k} on shape "
                    f"{arr.shape} (padded to whole blocks)")
        if pad:
            moved = np.concatenate([moved, np.zeros((*moved.shape[:-1], pad), dtype=moved.dtype)], axis=-1)
        return np.ascontiguousarray(moved).reshape(-1, k), ax, L, moved.shape

    def quantize(self, x: object, axis: int = -1, global_scale: object = None, *, random_bits: object = None,
                 seed: object = None, threads: int | None = None, **kwargs: Any) -> QArray:
        """Quantize blocks of ``block_size`` consecutive elements along ``axis`` (default -1).

        global_scale: NVFP4 two-level scale in the rule's own terms (amax_encode_reciprocal and
        input_dtype_encode: the tensor amax g; tensor_scale_clamped: pts = amax / 2688; prescaled_divide: the
        divisor gs). None: amax_encode_reciprocal computes g = max|x| over the tensor, prescaled_divide uses
        gs = 1, the other two quantize single-level.
        random_bits, seed: the N-bit random integers of a stochastic rounding (block.md §13): ``random_bits``
        broadcast to x's shape (R[i] rounds x[i]), or ``seed`` (the PCG64 stream of elements.md §2.5, one
        integer per element of x in C order). Only for the stochastic modes; padding elements take R = 0.
        threads: threads for a large x, whole blocks per chunk (default None: $QREF_NUM_THREADS, else every
        core; the result never depends on it, elements.md §2.11)."""
        if kwargs:
            raise QrefError(f"{type(self).__name__}.quantize takes axis=, global_scale=, threads=, random_bits= and "
                            f"seed=, got {sorted(kwargs)}")
        arr = as_source_array(x)
        if arr.dtype.kind == "b":  # pragma: no cover - as_source_array rejects booleans
            raise QrefError("boolean input")
        xb, ax, L, moved_shape = self._blocks(arr, axis)
        rb = None
        if self.stochastic:
            assert self.rules.stochastic_bits is not None
            r = stochastic_random_bits(arr.shape, self.rules.stochastic_bits, random_bits, seed).reshape(arr.shape)
            rb = self._blocks(r, axis)[0]  # the same moves as x; padding takes R = 0 (its values are exact zeros)
        elif random_bits is not None or seed is not None:
            raise QrefError(f"random_bits / seed are for stochastic rounding; {self.name} rounds "
                            f"{self.rules.rounding!r} (pass rounding='stochastic_a', stochastic_bits=N)")
        gs = None
        if global_scale is not None:
            rule = getattr(self.rules, "global_scale_rule", "exact")
            if rule in ("exact", "input_dtype_clip"):
                raise QrefError(f"{self.name} with global_scale_rule={rule!r} takes no global scale; NVFP4 "
                                "two-level scaling needs a global_scale_rule other than 'exact' (e.g. "
                                "profile='nvidia', 'torchao_floor', 'mlx' or 'jax')")
            try:
                if np.asarray(global_scale).dtype.kind in "USbO":  # not '1.0' (a string), not True
                    raise TypeError
                g = np.asarray(global_scale, dtype=np.float64)
            except (TypeError, ValueError):
                raise QrefError(f"global_scale must be a single float value, got {global_scale!r}") from None
            if g.size != 1:
                raise QrefError("global_scale must be a single float32 value")
            gs = np.float32(g.reshape(-1)[0])
            if np.isnan(gs) or gs < 0:  # block.md §5.2 (C1): a given amax or scale is >= 0, not NaN
                raise QrefError(f"global_scale must be >= 0 and not NaN (a tensor amax or scale in the rule's "
                                f"terms; +Inf is allowed), got {float(gs)!r}")
        g_blocks = None
        if self.kind == "float_scale":
            if self.rules.global_scale_granularity != "tensor":
                if gs is not None:
                    raise QrefError(f"global_scale_granularity={self.rules.global_scale_granularity!r} computes one "
                                    "outer amax per row or 1 x 64 tile from x itself; pass no global_scale")
                g_blocks = nvfp4.group_amax(xb, moved_shape[-1] // self.block_size, self.rules.global_scale_granularity,
                                            skip_nan=self.rules.amax_nan == "skip")
            elif gs is None and self.rules.global_scale_rule == "amax_encode_reciprocal":
                gs = nvfp4.tensor_amax(arr, skip_nan=self.rules.amax_nan == "skip")
        out = BlockOutputs(xb.shape[0])

        def work(lo: int, hi: int) -> None:  # whole blocks: each block's result is its own (elements.md §2.11)
            for a, b in pieces(lo, hi, self.block_size):  # bounded temporaries, written into out's rows a:b
                xr, rr = xb[a:b], None if rb is None else rb[a:b]
                if self.kind == "mx":
                    out.put(a, b, mx.quantize_mx_blocks(self.rules, self.format, xr, rr))
                elif self.kind == "float_scale":  # an outer amax per block (§5.2.1) is sliced with its blocks
                    out.put(a, b, nvfp4.quantize_float_scaled_blocks(self.rules, self.format, xr,
                                                                     gs if g_blocks is None else g_blocks[a:b],
                                                                     rr))
                else:
                    out.put(a, b, affine.quantize_affine_blocks(self.rules, self.format, xr, rr))

        with thread_limit(threads):
            run_chunks(work, xb.shape[0], self.block_size)
        lead = moved_shape[:-1]
        nb_row = moved_shape[-1] // self.block_size

        def back(a: np.ndarray, per_block: bool) -> np.ndarray:
            a = a.reshape((*lead, nb_row)) if per_block else a.reshape(moved_shape)[..., :L]
            return np.moveaxis(a, -1, ax)

        g = out.arrays.get("global_scale")
        if g is not None and np.ndim(g):  # an outer amax per block (global_scale_granularity, §5.2.1)
            g = back(np.asarray(g, dtype=np.float32), True)
        return QArray(
            codes=back(out.arrays["codes"], False),
            scheme=self,
            scales=back(out.arrays["scales"], True),
            biases=back(out.arrays["biases"], True) if "biases" in out.arrays else None,
            global_scale=None if g is None else np.asarray(g, dtype=np.float32),
            unspecified=back(out.arrays["unspecified"], False),
            axis=ax,
            meta={"input_dtype": xb.dtype.name, "length": L,
                  "scales_unspecified": back(out.arrays["scales_unspecified"], True)},
        )

    def dequantize(self, q: QArray, dtype: object = np.float32, *, threads: int | None = None) -> np.ndarray:
        """Values of a QArray of this scheme as ``dtype`` (block.md §4.8, §5.4, §6); threads: as quantize's."""
        dt = np.dtype(dtype)
        raw = np.asarray(q.codes)
        nbits = self.element.bits
        if raw.dtype.kind not in "iu" or (raw.size and (int(raw.min()) < 0 or int(raw.max()) >= 1 << nbits)):
            raise QrefError(f"codes of {self.name} are {nbits}-bit element codes in [0, 2^{nbits}); got "
                            + (f"dtype {raw.dtype}" if raw.dtype.kind not in "iu" else
                               f"values in [{int(raw.min())}, {int(raw.max())}]"))
        ax = q.axis if q.axis is not None else q.codes.ndim - 1
        codes, _, L, moved_shape = self._blocks(raw, ax)
        k = self.block_size
        scales = native(np.moveaxis(np.asarray(q.scales), ax, -1).reshape(-1))
        if scales.size * k != codes.size:
            raise QrefError(f"{scales.size} scales do not match {codes.size} codes in blocks of {k}")
        biases = (None if self.kind in ("mx", "float_scale")
                  else native(np.moveaxis(np.asarray(q.biases), ax, -1).reshape(-1)))
        g = q.global_scale
        per_block_g = g is not None and np.ndim(g) and np.size(g) > 1
        if per_block_g:  # an outer scale per block, shaped as the scales (§5.2.1)
            g = np.moveaxis(np.asarray(g, dtype=np.float32), ax, -1).reshape(-1)
        v = np.empty(codes.shape, dtype=dt)

        def work(lo: int, hi: int) -> None:  # whole blocks (elements.md §2.11), bounded temporaries
            for a, b in pieces(lo, hi, k):
                c, sc = codes[a:b], scales[a:b]
                if self.kind == "mx":
                    v[a:b] = mx.dequantize_mx(self.rules, self.format, c, sc, dt)
                elif self.kind == "float_scale":
                    v[a:b] = nvfp4.dequantize_float_scaled(self.rules, self.format, c, sc,
                                                           g[a:b] if per_block_g else g, dt)
                else:
                    assert biases is not None
                    v[a:b] = affine.dequantize_affine(self.rules, self.format, c, sc, biases[a:b], dt)

        with thread_limit(threads):
            run_chunks(work, codes.shape[0], k)
        return np.moveaxis(v.reshape(moved_shape)[..., :L], -1, ax)

    # ---- spec ---------------------------------------------------------------------------------------------
    def to_spec(self) -> dict[str, Any]:
        """The spec of the committed suite: every key of SPEC_KEYS (a rule the kind lacks: its default value);
        stochastic_bits, amax_floor, global_scale_granularity, tiny_quotient and nan_block_float32 are left out at
        their defaults."""
        fmt, have = self.format, self.rules.values()
        own = {"name": fmt.name, "element": fmt.element.name, "block_size": fmt.block_size, "kind": self.kind,
               "scale_format": None if fmt.scale is None else fmt.scale.name, "profile": self.profile,
               "element_scale_exp": fmt.element_scale_exp}
        spec: dict[str, Any] = {"family": "block"}
        for k in SPEC_KEYS:
            v = own[k] if k in own else have.get(k, _RULE_DEFAULTS[k])
            if k in _SPEC_OMIT and v == _SPEC_OMIT[k]:
                continue
            spec[k] = v
        return spec


def native(a: np.ndarray) -> np.ndarray:
    """``a`` in the machine's byte order (a '>f4' array of affine scales holds the same values)."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


class BlockOutputs:
    """The per-block outputs of one quantize (codes, scales, masks, ...), each with one row per block: a chunk's
    pieces write their rows in place, in any order and on any thread (no join afterwards). The first piece
    allocates every array (under a lock); a scalar global scale is the tensor's, the same in every piece, and
    an outer scale per block (§5.2.1) has a row per block like the scales."""

    def __init__(self, blocks: int) -> None:
        self.blocks, self.arrays, self._lock = blocks, {}, threading.Lock()

    def put(self, a: int, b: int, res: dict[str, Any]) -> None:
        with self._lock:
            if not self.arrays:
                for name, v in res.items():
                    if v is not None:
                        v = np.asarray(v)
                        new = np.zeros if v.dtype == bool else np.empty  # masks: untouched zero pages
                        self.arrays[name] = v if v.ndim == 0 else new((self.blocks, *v.shape[1:]), v.dtype)
        for name, v in res.items():
            dst = self.arrays.get(name)
            if dst is None:
                continue
            if dst.ndim:
                if np.asarray(v).dtype != dst.dtype:  # every piece's kernel returns the same dtypes
                    raise AssertionError(f"block piece {name}: {np.asarray(v).dtype} != {dst.dtype}")
                if dst.dtype != bool or v.any():  # an all-False mask piece leaves its zero pages untouched
                    dst[a:b] = v


FIELD_NAMES = tuple(f.name for f in fields(BlockScheme))


def rules_with(rules: KindRules, overrides: dict[str, Any], what: str) -> KindRules:
    """``replace(rules, **overrides)`` (the records check the values); a rule of another kind is an error unless
    it is that rule's default value (the committed specs list every kind's rules)."""
    own = {f.name for f in fields(rules)}
    mine = {k: v for k, v in overrides.items() if k in own}
    for k, v in overrides.items():
        if k in own:
            continue
        if k not in _RULE_DEFAULTS:
            raise unknown_name(f"{what} rule", k, sorted(own))
        if v != _RULE_DEFAULTS[k]:
            raise QrefError(f"{k}={v!r} is not a rule of {rules.kind} schemes ({type(rules).__name__}, block.md "
                            f"§2); their rules: {', '.join(sorted(own))}")
    return replace(rules, **mine) if mine else rules


def from_spec(spec: dict[str, Any]) -> BlockScheme:
    """The BlockScheme of a spec written by ``to_spec`` (the committed suite's keys)."""
    spec = dict(spec)
    spec.pop("family", None)
    unknown = set(spec) - set(SPEC_KEYS)
    if unknown:
        raise unknown_name("block scheme field", sorted(unknown)[0], SPEC_KEYS)
    kind = spec.pop("kind")
    if kind not in RULES_OF_KIND:
        raise unknown_name("block scheme kind", kind, KINDS)
    sf = spec.pop("scale_format", None)
    fmt = BlockFormat(spec.pop("name"), get_format(spec.pop("element")), spec.pop("block_size"),
                      None if sf is None else get_format(sf), spec.pop("element_scale_exp", 0))
    profile = spec.pop("profile", None)
    return BlockScheme(fmt, rules_with(RULES_OF_KIND[kind](), spec, "block scheme"), profile)


def _profile_section(prof: Profile, kind: str, name: str) -> KindRules:
    """The rules record of profile ``prof`` for scheme kind ``kind`` (block.md §8)."""
    sect = rules_of(prof).kind(kind)
    if sect is None:
        have = sorted(n for n, p in profiles("block").items() if rules_of(p).kind(kind) is not None)
        raise QrefError(f"block profile {prof.name!r} ({prof.system}) defines no {kind} rules for {name!r}; "
                        f"profiles with {kind} rules: {', '.join(have)}")
    return sect


def _build(name: str | Format, *, profile: str | None = None, block_size: int | None = None,
           group_size: int | None = None, bits: int | None = None, scale_format: str | Format | None = None,
           **overrides: Any) -> BlockScheme:
    """Builder for qref.scheme: named schemes and element formats with block_size (block.md §2).

    overrides: rules of the scheme's kind (``replace(profile rules, **overrides)``; None leaves a rule as the
    profile has it, except nan), ``element`` (a format name) and ``element_scale_exp``."""
    # numpy integers (np.int64(32) from shape arithmetic) are the integers they hold; the records check the rest
    block_size, group_size, bits = (int(v) if isinstance(v, np.integer) else v for v in (block_size, group_size, bits))
    if isinstance(name, str) and name in NAMED_SCHEMES:
        named = NAMED_SCHEMES[name]
        kind, ses, sname = named.kind, named.element_scale_exp, name
        if scale_format is not None and get_format(scale_format).name != named.scale:
            raise QrefError(f"{name} has scale format {named.scale}; for another scale format use the element "
                            f"format with block_size= and scale_format=")
        if kind == "affine":
            if block_size is not None and group_size is not None and block_size != group_size:
                raise QrefError("give group_size or block_size, not two different values")
            k = group_size if group_size is not None else (block_size if block_size is not None else named.block_size)
            b = 4 if bits is None else bits
            if not isinstance(b, int) or not 1 <= b <= 8:
                raise QrefError(f"mlx_affine bits must be an integer in 1..8, got {bits!r}")
            element: Format = get_format(f"uint{b}")
            scale_fmt = None
        else:
            if bits is not None or group_size is not None:
                raise QrefError(f"bits= and group_size= are mlx_affine parameters; {name} takes block_size=")
            assert named.element is not None and named.scale is not None
            element = get_format(named.element)
            scale_fmt = get_format(named.scale)
            k = named.block_size if block_size is None else block_size
    else:
        element = get_format(name)
        sname = element.name
        if bits is not None or group_size is not None:
            raise QrefError("bits= and group_size= are mlx_affine parameters")
        if block_size is None:
            raise QrefError(f"{sname} as a block scheme needs block_size=")
        scale_fmt = get_format(scale_format if scale_format is not None else "float8_e8m0fnu")
        if not isinstance(scale_fmt, FloatFormat):
            raise QrefError(f"scale_format must be a float format, got {scale_fmt.name}")
        kind = "mx" if scale_fmt.mantissa_bits == 0 else "float_scale"
        ses = 0
        k = block_size
    assert isinstance(scale_fmt, FloatFormat) or scale_fmt is None
    pname = profile or (DEFAULT_PROFILE["nvfp4"] if sname.startswith("nvfp4") else DEFAULT_PROFILE[kind])
    prof = get_profile(pname, "block")
    rules = _profile_section(prof, kind, sname)
    prules = rules_of(prof)
    elem_rules = prules.for_element(element.name)
    support = prules.support(kind)
    elems = support.elements
    if elems is not None and element.name not in elems:
        raise QrefError(f"profile {pname!r} ({prof.system}) has no {sname} ({element.name} elements); it supports "
                        f"{', '.join(elems)}")
    sizes = support.block_sizes
    if sizes is not None and k not in sizes:
        raise QrefError(f"profile {pname!r} ({prof.system}) takes block sizes {sizes} for {kind} schemes, got {k}")
    bits_ok = support.bits
    if bits_ok is not None and element.bits not in bits_ok:
        raise QrefError(f"profile {pname!r} ({prof.system}) takes bits {bits_ok}, got {element.bits}")
    for key in overrides:
        if key not in _OVERRIDABLE:
            raise unknown_name("block scheme option", key, (*_OVERRIDABLE, "profile", "block_size", "group_size",
                                                             "bits", "scale_format"))
    ov = {k_: v for k_, v in overrides.items() if v is not None or k_ == "nan"}
    if "element" in ov:
        element = ov.pop("element")
        element = element if isinstance(element, (FloatFormat, IntFormat)) else get_format(element)
    ses = ov.pop("element_scale_exp", ses)
    own = {f.name for f in fields(rules)}
    rules = replace(rules, **{k_: v for k_, v in elem_rules.items() if k_ in own})
    fmt = BlockFormat(sname, element, k, scale_fmt, ses)  # type: ignore[arg-type]
    return BlockScheme(fmt, rules_with(rules, ov, f"{kind} scheme"), pname)


_OVERRIDABLE = (*RULE_FIELDS, "element", "element_scale_exp")


def _claims(fmt: Format, kw: dict[str, Any]) -> bool:
    return isinstance(fmt, (FloatFormat, IntFormat)) and "block_size" in kw and not ({"scale", "zero_point"} & set(kw))


register_family("block", builder=_build, from_spec=from_spec, names=tuple(NAMED_SCHEMES), claims=_claims,
                order=200)

__all__ = ["CHOICES", "NAMED_SCHEMES", "RULE_FIELDS", "SPEC_KEYS", "BlockScheme", "from_spec", "read_through"]

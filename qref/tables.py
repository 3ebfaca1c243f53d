"""Lookup tables as data, with provenance, and the builders that derive them (spec: docs/spec/lut.md §1-2).

A ``Table`` is a frozen record: ``bits`` holds the float32 bit pattern of every entry in code order (code i ->
``values[i]``), plus the storage format of the codes, the source it was taken from and, where one exists, the
derivation that reproduces it. Shipped tables are constants (the published float32 bit patterns); builders are
documented, tested generators:

- ``nf_table(bits, offset, recipe)``: NormalFloat-k (QLoRA §3 / bitsandbytes ``create_normal_map``). With
  ``recipe="float32"`` (the bitsandbytes way: torch float32 linspace, scipy ndtri rounded to float32, float32
  normalization) ``nf_table(4)`` reproduces the shipped NF4 bit for bit; ``recipe="float64"`` does not (lut.md §2.1).
- ``dynamic_map(...)``: bitsandbytes' 8-bit dynamic map (``create_dynamic_map``), mirrored in float32.
- ``quantile_table(bits, source, method)``: quantile tables from a distribution or from sample data, either
  bitsandbytes-style quantile points (``"points"``) or equal-mass bin edges with explicit thresholds (``"edges"``).
- ``lloyd_max_table(bits, source)``: MSE-optimal (Lloyd-Max) tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any, Literal

import numpy as np

from .core.arith import F32, convert, float32_bits, fma_float32
from .errors import QrefError, unknown_name
from .formats import FloatFormat, Format, IntFormat, get_format

__all__ = [
    "Table",
    "dynamic_map",
    "get_table",
    "linspace_float32",
    "lloyd_max_table",
    "nf_table",
    "qlora_offset",
    "quantile_table",
    "register_table",
    "tables",
]


def _hex_bits(text: str) -> tuple[int, ...]:
    s = "".join(text.split())
    if len(s) % 8:
        raise QrefError("hex table text must hold 8 hex digits per entry")
    return tuple(int(s[i:i + 8], 16) for i in range(0, len(s), 8))


@dataclass(frozen=True)
class Table:
    """A lookup table: code i stands for the float32 value whose bit pattern is ``bits[i]`` (lut.md §1.1).

    name: registry name. bits: float32 bit patterns in code (index) order. storage: the format of the stored
    codes (a qref format name: "uint4", "uint8", "int4", a narrowed "int8<-2:2>", "float4_e2m1fn"...); index i is
    stored as the storage value ``storage_min + i`` for integer storage and as the bit pattern i for float
    storage. source: where the constants come from. derivation: how to regenerate them (empty when none).
    thresholds: optional float32 bit patterns of explicit decision thresholds (ascending, one fewer than the
    entries; only for tables sorted ascending): code = number of thresholds below the scaled value, instead of
    nearest-entry midpoints (equal-mass tables, lut.md §2.3).
    """

    name: str
    bits: tuple[int, ...]
    storage: str = "uint4"
    source: str = ""
    derivation: str = ""
    thresholds: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        bits = tuple(int(b) for b in self.bits)
        object.__setattr__(self, "bits", bits)
        if len(bits) < 2:
            raise QrefError(f"table {self.name!r}: a table needs at least 2 entries, got {len(bits)}")
        if any(not 0 <= b < (1 << 32) for b in bits):
            raise QrefError(f"table {self.name!r}: bits are float32 bit patterns (0 <= b < 2^32)")
        vals = np.array(bits, dtype=np.uint32).view(np.float32)
        if not np.isfinite(vals).all():
            bad = int(np.nonzero(~np.isfinite(vals))[0][0])
            raise QrefError(f"table {self.name!r}: entry {bad} is {vals[bad]} (0x{bits[bad]:08x}); table entries "
                            "must be finite")
        fmt = get_format(self.storage)
        expected = _storage_count(fmt)
        if len(bits) != expected:
            raise QrefError(
                f"table {self.name!r}: {len(bits)} entries but storage {fmt.name} holds {expected} values; give "
                f"one entry per storage value (e.g. storage='uint{max(1, (len(bits) - 1).bit_length())}' for "
                f"{len(bits)} entries, or a narrowed integer range such as 'int8<-2:2>')"
            )
        if self.thresholds is not None:
            thr = tuple(int(b) for b in self.thresholds)
            object.__setattr__(self, "thresholds", thr)
            t = np.array(thr, dtype=np.uint32).view(np.float32)
            if len(thr) != len(bits) - 1:
                raise QrefError(f"table {self.name!r}: {len(thr)} thresholds for {len(bits)} entries; give "
                                f"{len(bits) - 1}")
            if not np.isfinite(t).all() or (np.diff(t.astype(np.float64)) < 0).any():
                raise QrefError(f"table {self.name!r}: thresholds must be finite and ascending")
            if (np.diff(vals.astype(np.float64)) < 0).any():
                raise QrefError(f"table {self.name!r}: explicit thresholds need entries sorted ascending")

    # ---- derived views -------------------------------------------------------------------------------------
    @cached_property
    def values(self) -> np.ndarray:
        """Entries as float32, in code order (read-only)."""
        v = np.array(self.bits, dtype=np.uint32).view(np.float32)
        v.setflags(write=False)
        return v

    @cached_property
    def threshold_values(self) -> np.ndarray | None:
        if self.thresholds is None:
            return None
        t = np.array(self.thresholds, dtype=np.uint32).view(np.float32)
        t.setflags(write=False)
        return t

    @property
    def size(self) -> int:
        return len(self.bits)

    @property
    def storage_format(self) -> Format:
        return get_format(self.storage)

    @property
    def storage_min(self) -> int:
        """Storage value of index 0 (integer storage: the format's lower bound; float storage: 0)."""
        fmt = self.storage_format
        return fmt.lo if isinstance(fmt, IntFormat) else 0

    @cached_property
    def order(self) -> np.ndarray:
        """Codes sorted by value, ties (equal values, e.g. +0 and -0) by code: a stable argsort."""
        o = np.argsort(self.values.astype(np.float64), kind="stable").astype(np.int64)
        o.setflags(write=False)
        return o

    @property
    def is_sorted(self) -> bool:
        return bool((self.order == np.arange(self.size)).all())

    @property
    def hex(self) -> tuple[str, ...]:
        return tuple(f"{b:08x}" for b in self.bits)

    def exact_values(self) -> tuple[Fraction, ...]:
        """Entries as exact rationals."""
        return tuple(Fraction(float(v)) for v in self.values)

    def code_of(self, value: float) -> int:
        """The code whose entry equals ``value`` exactly (first one), or raise."""
        hit = np.nonzero(self.values == np.float32(value))[0]
        if hit.size == 0:
            raise QrefError(f"table {self.name!r} has no entry equal to {value!r}")
        return int(hit[0])

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"name": self.name, "bits": list(self.hex), "storage": self.storage,
                                "source": self.source, "derivation": self.derivation}
        if self.thresholds is not None:
            spec["thresholds"] = [f"{b:08x}" for b in self.thresholds]
        return spec

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Table:
        thr = spec.get("thresholds")
        return cls(spec["name"], tuple(int(h, 16) for h in spec["bits"]), spec.get("storage", "uint4"),
                   spec.get("source", ""), spec.get("derivation", ""),
                   None if thr is None else tuple(int(h, 16) for h in thr))

    @classmethod
    def from_values(
        cls,
        name: str,
        values: Iterable[float] | np.ndarray,
        *,
        storage: str | None = None,
        source: str = "user table",
        derivation: str = "",
        thresholds: Iterable[float] | np.ndarray | None = None,
        exact: bool = True,
    ) -> Table:
        """A table from values. float32 arrays are taken bit for bit; other values must be exactly
        representable in float32 (``exact=True``, the default) or are rounded to float32 by nearest_even
        (``exact=False``). storage=None: "uint{k}" for 2^k entries."""
        v32 = _to_float32(values, exact, f"table {name!r}")
        thr = None if thresholds is None else float32_bits(_to_float32(thresholds, exact, f"table {name!r}"))
        if storage is None:
            k = (v32.size - 1).bit_length()
            if v32.size < 2 or (1 << k) != v32.size:
                raise QrefError(f"table {name!r}: {v32.size} entries is not a power of two; pass storage= (e.g. "
                                f"a narrowed integer range 'int8<0:{v32.size - 1}>')")
            storage = f"uint{k}"
        return cls(name, float32_bits(v32), storage, source, derivation, thr)


def _to_float32(values: Iterable[float] | np.ndarray, exact: bool, what: str) -> np.ndarray:
    arr = np.asarray(values if isinstance(values, np.ndarray) else list(values))
    if arr.dtype == np.float32:
        return arr.ravel()
    if arr.dtype.kind not in "fiu" and arr.dtype.name != "bfloat16":
        raise QrefError(f"{what}: values must be real numbers, got dtype {arr.dtype}")
    v = convert(arr.astype(np.float64).ravel(), F32)
    if exact:
        back = v.astype(np.float64)
        bad = np.nonzero(back != arr.astype(np.float64).ravel())[0]
        if bad.size:
            i = int(bad[0])
            raise QrefError(f"{what}: entry {i} = {arr.ravel()[i]!r} is not exactly a float32 (nearest is "
                            f"{float(v[i])!r}); pass float32 values or exact=False to round them")
    return v


def _storage_count(fmt: Format) -> int:
    if isinstance(fmt, IntFormat):
        return fmt.hi - fmt.lo + 1
    assert isinstance(fmt, FloatFormat)
    if fmt.bits > 16:
        raise QrefError(f"storage {fmt.name}: lookup codes need a storage format of at most 16 bits")
    return 1 << fmt.bits


# ---------------------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------------------
_TABLES: dict[str, Table] = {}


def register_table(table: Table, *, replace: bool = False) -> Table:
    """Add a table to the registry so ``get_table(name)`` and ``qref.scheme("lut", table=name)`` find it."""
    if not isinstance(table, Table):
        raise QrefError(f"register_table expects a Table, got {type(table).__name__}")
    if table.name in _TABLES and not replace:
        raise QrefError(f"table {table.name!r} is already registered (pass replace=True to overwrite)")
    _TABLES[table.name] = table
    return table


def get_table(name: str | Table) -> Table:
    """A registered table by name (a Table is returned as is)."""
    if isinstance(name, Table):
        return name
    try:
        return _TABLES[name]
    except (KeyError, TypeError):
        raise unknown_name("lookup table", name, _TABLES) from None


def tables() -> dict[str, Table]:
    """All registered tables by name."""
    return dict(sorted(_TABLES.items()))


# ---------------------------------------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------------------------------------
def linspace_float32(start: float, end: float, steps: int) -> np.ndarray:
    """torch.linspace(start, end, steps, dtype=float32) on CPU, bit for bit (lut.md §2.1).

    start and end are rounded to float32; step = float32((end - start) / (steps - 1)); element i is
    fma(step, i, start) for i < steps // 2 and fma(-step, steps - 1 - i, end) otherwise, each rounded once.
    """
    if steps < 1:
        raise QrefError(f"linspace needs steps >= 1, got {steps}")
    s = convert(np.float64(start), F32)
    e = convert(np.float64(end), F32)
    if steps == 1:
        return np.array([s], dtype=np.float32)
    step = np.float32((e - s) / np.float32(steps - 1))
    idx = np.arange(steps)
    half = steps // 2
    low = idx < half
    k = np.where(low, idx, steps - 1 - idx).astype(np.float32)
    return fma_float32(np.where(low, step, -step).astype(np.float32), k,
                       np.where(low, s, e).astype(np.float32))


def qlora_offset(bits: int = 4) -> Fraction:
    """QLoRA's offset for NF-k: the mean of 1 - 1/(2(2^k - 1)) and 1 - 1/2^(k+1) (31/32 and 29/30 for k = 4:
    0.96770833...). bitsandbytes ships the 7-digit literal 0.9677083, one float32 ulp below this value."""
    n = 1 << bits
    return Fraction(1, 2) * ((1 - Fraction(1, 2 * (n - 1))) + (1 - Fraction(1, 2 * n)))


_NF4_OFFSET = 0.9677083


def nf_table(
    bits: int = 4,
    offset: float | None = None,
    *,
    recipe: Literal["float32", "float64"] = "float32",
    name: str | None = None,
) -> Table:
    """NormalFloat-k: 2^(k-1) positive normal quantiles, 2^(k-1) - 1 negative ones and zero, normalized to
    [-1, 1] (QLoRA §3; bitsandbytes create_normal_map(offset, use_extra_value=True)).

    pos = ndtri(linspace(offset, 1/2, 2^(k-1) + 1)[:-1]); neg = -ndtri(linspace(offset, 1/2, 2^(k-1))[:-1]);
    t = sort(neg ++ [0] ++ pos) / max. offset=None: 0.9677083 for k = 4 (the literal bitsandbytes uses), else
    float(qlora_offset(k)). recipe="float32" mirrors bitsandbytes (linspace_float32, ndtri in float64 rounded to
    float32 as scipy's float32 loop does, float32 division by the max); recipe="float64" computes everything in
    float64 and rounds once at the end. Only the float32 recipe reproduces NF4 (lut.md §2.1).
    """
    from scipy.special import ndtri

    if not isinstance(bits, int) or not 2 <= bits <= 8:
        raise QrefError(f"nf_table: bits must be an integer in 2..8, got {bits!r}")
    off = (_NF4_OFFSET if bits == 4 else float(qlora_offset(bits))) if offset is None else float(offset)
    if not 0.5 < off < 1:
        raise QrefError(f"nf_table: offset must be in (0.5, 1), got {off!r}")
    half = 1 << (bits - 1)
    if recipe == "float32":
        p_pos = linspace_float32(off, 0.5, half + 1)[:-1]
        p_neg = linspace_float32(off, 0.5, half)[:-1]
        pos = convert(ndtri(p_pos.astype(np.float64)), F32)
        neg = -convert(ndtri(p_neg.astype(np.float64)), F32)
        v = np.sort(np.concatenate([neg, np.zeros(1, np.float32), pos]).astype(np.float32))
        v = (v / v.max()).astype(np.float32)
    elif recipe == "float64":
        pos64 = ndtri(np.linspace(off, 0.5, half + 1)[:-1])
        neg64 = -ndtri(np.linspace(off, 0.5, half)[:-1])
        v64 = np.sort(np.concatenate([neg64, [0.0], pos64]))
        v = convert(v64 / v64.max(), F32)
    else:
        raise unknown_name("nf_table recipe", recipe, ("float32", "float64"))
    label = name or (f"nf{bits}" if recipe == "float32" and offset is None else f"nf{bits}_{recipe}_{off!r}")
    return Table(label, float32_bits(v), f"uint{bits}",
                 source="QLoRA (Dettmers et al. 2023, arXiv 2305.14314) §3; bitsandbytes create_normal_map",
                 derivation=f"nf_table(bits={bits}, offset={off!r}, recipe={recipe!r})")


def dynamic_map(signed: bool = True, max_exponent_bits: int = 7, total_bits: int = 8) -> Table:
    """bitsandbytes create_dynamic_map (Dettmers 2016, arXiv 1511.04561) mirrored in float32 (lut.md §2.2).

    For i in 0..E-1 (E = max_exponent_bits, N = total_bits - 1): b = linspace_float32(0.1, 1, m_i + 1) with
    m_i = 2^(i + N - E) (signed) or 2^(i + N - E + 1) (unsigned); means = (b[:-1] + b[1:]) / 2; entries
    float32(10^(i - E + 1)) * means (and their negatives when signed); plus 2^(N - E) - 1 extra means at the last
    decade, 0 and 1; sorted ascending. Every operation is one float32 rounding, as torch computes it.
    """
    non_sign = total_bits - 1
    extra = 2 ** (non_sign - max_exponent_bits) - 1
    data: list[np.ndarray] = []

    def decade(i: int, items: int) -> None:
        b = linspace_float32(0.1, 1.0, items)
        means = ((b[:-1] + b[1:]) / np.float32(2)).astype(np.float32)
        scale = convert(np.float64(10 ** (-(max_exponent_bits - 1) + i)), F32)
        vals = (scale * means).astype(np.float32)
        data.append(vals)
        if signed:
            data.append(-vals)

    i = 0
    for i in range(max_exponent_bits):
        shift = i + non_sign - max_exponent_bits + (0 if signed else 1)
        decade(i, 2 ** shift + 1)
    if extra > 0:
        decade(i, extra + 1)
    data.append(np.array([0.0, 1.0], dtype=np.float32))
    v = np.sort(np.concatenate(data).astype(np.float32))
    if v.size != 2 ** total_bits:
        raise QrefError(f"dynamic_map: these parameters give {v.size} entries, not 2^{total_bits}")
    return Table("dynamic8" if (signed, max_exponent_bits, total_bits) == (True, 7, 8) else
                 f"dynamic_{'s' if signed else 'u'}{total_bits}e{max_exponent_bits}",
                 float32_bits(v), f"uint{total_bits}",
                 source="bitsandbytes create_dynamic_map (8-bit Approximations for Parallelism in Deep Learning, "
                        "arXiv 1511.04561)",
                 derivation=f"dynamic_map(signed={signed}, max_exponent_bits={max_exponent_bits}, "
                            f"total_bits={total_bits})")


def _quantile_fn(source: Any) -> tuple[Any, str]:
    """(q(p) -> float64 quantiles, description) for a scipy distribution or an array of samples."""
    if hasattr(source, "ppf"):
        desc = getattr(getattr(source, "dist", None), "name", type(source).__name__)
        args = getattr(source, "args", ())
        kwds = getattr(source, "kwds", {})
        return (lambda p: np.asarray(source.ppf(p), dtype=np.float64)), f"{desc}{tuple(args)}{dict(kwds) or ''}"
    samples = np.asarray(source)
    if samples.dtype.kind not in "fiu" or samples.size < 2:
        raise QrefError("source must be a scipy.stats distribution (with .ppf) or an array of at least 2 samples")
    s = samples.astype(np.float64).ravel()
    if not np.isfinite(s).all():
        raise QrefError("sample data for a quantile table must be finite (drop NaN/Inf first)")
    return (lambda p: np.quantile(s, p)), f"{s.size} samples (np.quantile, method='linear')"


def quantile_table(
    bits: int,
    source: Any,
    *,
    method: Literal["points", "edges"] = "points",
    normalize: bool = True,
    name: str | None = None,
) -> Table:
    """A quantile table with K = 2^bits entries from a distribution (scipy.stats frozen, with .ppf) or from
    sample data (array; quantiles by np.quantile, method 'linear') (lut.md §2.3).

    method="points" (bitsandbytes-style): entries Q(p_i), p = linspace(1/(2K), 1 - 1/(2K), K); nearest-entry
    rounding gives near-equal counts. method="edges" (equal mass): thresholds Q(j/K), j = 1..K-1, and entries
    the bin medians Q((i + 1/2)/K); codes are counts of thresholds below the value, so every bin holds mass 1/K
    exactly. normalize=True divides entries (and thresholds) by the largest |entry|. Values are rounded to
    float32 (nearest_even) once, after the float64 computation.
    """
    if not isinstance(bits, int) or not 1 <= bits <= 16:
        raise QrefError(f"quantile_table: bits must be an integer in 1..16, got {bits!r}")
    q, desc = _quantile_fn(source)
    k = 1 << bits
    thr = None
    if method == "points":
        vals = q(np.linspace(1 / (2 * k), 1 - 1 / (2 * k), k))
    elif method == "edges":
        vals = q((np.arange(k) + 0.5) / k)
        thr = q(np.arange(1, k) / k)
    else:
        raise unknown_name("quantile_table method", method, ("points", "edges"))
    if not np.isfinite(vals).all():
        raise QrefError("quantile_table: the distribution gives non-finite quantiles")
    if normalize:
        m = np.max(np.abs(vals))
        if m == 0:
            raise QrefError("quantile_table: every quantile is zero; nothing to normalize")
        vals = vals / m
        thr = None if thr is None else thr / m
    v32 = convert(vals, F32)
    t32 = None if thr is None else float32_bits(convert(thr, F32))
    label = name or f"quantile{bits}_{method}"
    return Table(label, float32_bits(v32), f"uint{bits}", source=f"quantiles of {desc}",
                 derivation=f"quantile_table(bits={bits}, method={method!r}, normalize={normalize})",
                 thresholds=t32)


def _normal_bin_means(lo: np.ndarray, hi: np.ndarray, loc: float, scale: float) -> np.ndarray:
    from scipy.stats import norm

    a, b = (lo - loc) / scale, (hi - loc) / scale
    mass = norm.cdf(b) - norm.cdf(a)
    return loc + scale * (norm.pdf(a) - norm.pdf(b)) / mass


def lloyd_max_table(
    bits: int,
    source: Any,
    *,
    normalize: bool = False,
    max_iter: int = 1000,
    tol: float = 1e-12,
    name: str | None = None,
) -> Table:
    """The MSE-optimal K = 2^bits entry table (Lloyd 1982 / Max 1960) for a distribution or sample data.

    Starting from the quantile points, iterate: thresholds = midpoints of neighbouring entries; entries =
    E[X | bin] (closed form for the normal distribution, scipy's expect() for others, bin means for samples)
    until no entry moves by more than tol (relative to the spread) or max_iter. normalize=True divides by the
    largest |entry|. Values are rounded to float32 once at the end (lut.md §2.4).
    """
    if not isinstance(bits, int) or not 1 <= bits <= 12:
        raise QrefError(f"lloyd_max_table: bits must be an integer in 1..12, got {bits!r}")
    k = 1 << bits
    q, desc = _quantile_fn(source)
    t = q(np.linspace(1 / (2 * k), 1 - 1 / (2 * k), k)).astype(np.float64)
    if hasattr(source, "ppf"):
        dist = source
        is_norm = getattr(getattr(dist, "dist", None), "name", "") == "norm"
        loc, scale = (float(dist.mean()), float(dist.std())) if is_norm else (0.0, 1.0)

        def means(edges: np.ndarray) -> np.ndarray:
            lo = np.concatenate([[-np.inf], edges])
            hi = np.concatenate([edges, [np.inf]])
            if is_norm:
                return _normal_bin_means(lo, hi, loc, scale)
            return np.array([dist.expect(lambda x: x, lb=a, ub=b, conditional=True) for a, b in zip(lo, hi)])
    else:
        s = np.sort(np.asarray(source, dtype=np.float64).ravel())
        csum = np.concatenate([[0.0], np.cumsum(s)])

        def means(edges: np.ndarray) -> np.ndarray:
            cut = np.concatenate([[0], np.searchsorted(s, edges, side="left"), [s.size]])
            cnt = np.diff(cut)
            tot = csum[cut[1:]] - csum[cut[:-1]]
            return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)

    spread = float(t[-1] - t[0]) or 1.0
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (it is reported in the derivation)
        new = means((t[:-1] + t[1:]) / 2)
        new = np.where(np.isnan(new), t, new)  # an empty bin keeps its entry
        moved = float(np.max(np.abs(new - t)))
        t = new
        if moved <= tol * spread:
            break
    if normalize:
        t = t / np.max(np.abs(t))
    v32 = convert(t, F32)
    label = name or f"lloyd_max{bits}"
    return Table(label, float32_bits(v32), f"uint{bits}", source=f"Lloyd-Max (MSE-optimal) table of {desc}",
                 derivation=f"lloyd_max_table(bits={bits}, normalize={normalize}, tol={tol}) converged after "
                            f"{it} iterations")


# ---------------------------------------------------------------------------------------------------------
# shipped constants (the published float32 bit patterns)
# ---------------------------------------------------------------------------------------------------------
NF4 = Table(
    "nf4",
    _hex_bits("bf800000 bf3239b1 bf066b30 beca32a0 be91a24d be3d353f bdba7871 00000000"
              "3da2faff 3e24cae3 3e7c04dd 3ead033a 3ee1a4b8 3f1007ab 3f3913b3 3f800000"),
    "uint4",
    source="QLoRA (arXiv 2305.14314) Appendix E; bitsandbytes 0.50.2 get_4bit_type('nf4') and its CUDA/CPU "
           "kernels; OpenVINO ConvertNF4; qwix 0.1.8 get_nf4_buckets (the same 16 float32 values)",
    derivation="nf_table(bits=4, offset=0.9677083, recipe='float32')",
)

AF4 = Table(
    "af4",
    _hex_bits("3f800000 3f39685c 3f0e1203 3ed9ed55 3ea22dee 3e60e22a 3e0472f9 3d2f075f"
              "00000000 bd4a2141 be196bab be831c55 bebf54f7 bf032f19 bf31c4dc bf800000"),
    "uint4",
    source="AbnormalFloat4 for block size 64 (Yoshida 2023, 'NF4 Isn't Information Theoretically Optimal', arXiv "
           "2306.06965); bitsandbytes 0.50.2 get_4bit_type('af4', blocksize=64): the 8-digit literals rounded to "
           "float32, stored in descending order (code 0 = +1.0)",
    derivation="",
)

FP4_BNB = Table(
    "fp4_bnb",
    _hex_bits("00000000 3baaaaab 3f2aaaab 3f800000 3eaaaaab 3f000000 3e2aaaab 3e800000"
              "00000000 bbaaaaab bf2aaaab bf800000 beaaaaab bf000000 be2aaaab be800000"),
    "uint4",
    source="bitsandbytes 0.50.2 get_4bit_type('fp4'): [0, .0625, 8, 12, 4, 6, 2, 3, 0, -.0625, -8, -12, -4, -6, "
           "-2, -3] / 12 in float32 (code 8 is +0: the Python literal -0 is the integer 0); NOT OCP E2M1",
    derivation="float32(v / 12) for the listed v (one float32 division each)",
)

NF4_TORCHAO = Table(
    "nf4_torchao",
    _hex_bits("bf800000 bf323a2a bf066cf4 beca3055 be919ce0 be3d3c36 bdba92a3 00000000"
              "3da30553 3e24c2f8 3e7c01a3 3ead013b 3ee1a36e 3f10068e 3f391687 3f800000"),
    "uint4",
    source="torchao 0.18.0 NF4Tensor.from_tensor: the 4-digit NF4 literals (-1.0000, -0.6962, ... 0.7230, "
           "1.0000) rounded to float32; torchao casts them to the input dtype",
    derivation="",
)

DYNAMIC8 = Table(
    "dynamic8",
    _hex_bits("""
    bf7e3333bf7a999abf770000bf736666bf6fcccdbf6c3333bf68999abf650000bf616666bf5dcccdbf5a3333bf56999a
    bf530000bf4f6666bf4bcccdbf483333bf44999abf410000bf3d6666bf39cccdbf363334bf32999abf2f0000bf2b6666
    bf27cccdbf243334bf20999abf1d0000bf196666bf15cccdbf123334bf0e999abf0b0000bf076666bf03ccccbf003333
    bef93332bef20000beeaccccbee3999abedc6666bed53333bece0000bec6ccccbebf999abeb86666beb13333beaa0000
    bea2ccccbe9b999abe946666be8d3334be860000be7d9999be6f3333be60cccdbe526666be440000be35999abe273333
    be18cccdbe0a6666bdf80000bddb3334bdc9eb85bdc428f7bdbe6667bdb8a3d7bdb2e148bdad1eb8bda75c2abda1999a
    bd9bd70abd96147bbd9051ebbd8a8f5dbd84cccdbd7e147bbd728f5dbd670a3dbd5b851fbd500000bd447ae1bd38f5c3
    bd2d70a3bd21eb85bd166667bd0ae148bcfeb852bce7ae15bcd0a3d7bcb9999abca28f5dbc8b851fbc68f5c3bc3ae148
    bc1f3b64bc160418bc0ccccdbc039581bbf4bc6abbe24dd3bbcfdf3bbbbd70a4bbab020dbb989374bb8624ddbb676c8a
    bb428f5cbb1db22dbaf1a9fcbaa7ef9dba7765ffba59e83eba3c6a80ba1eecc1ba016f01b9c7e283b98ce705b923d70b
    b8ba1f4bb88aefb3b8378034b7b24206b70205ffb65a1a94b513a3b7000000003513a3b7365a1a94370205ff37b24206
    38378034388aefb338ba1f4b3923d70b398ce70539c7e2833a016f013a1eecc13a3c6a803a59e83e3a7765ff3aa7ef9d
    3af1a9fc3b1db22d3b428f5c3b676c8a3b8624dd3b9893743bab020d3bbd70a43bcfdf3b3be24dd33bf4bc6a3c039581
    3c0ccccd3c1604183c1f3b643c3ae1483c68f5c33c8b851f3ca28f5d3cb9999a3cd0a3d73ce7ae153cfeb8523d0ae148
    3d1666673d21eb853d2d70a33d38f5c33d447ae13d5000003d5b851f3d670a3d3d728f5d3d7e147b3d84cccd3d8a8f5d
    3d9051eb3d96147b3d9bd70a3da1999a3da75c2a3dad1eb83db2e1483db8a3d73dbe66673dc428f73dc9eb853ddb3334
    3df800003e0a66663e18cccd3e2733333e35999a3e4400003e5266663e60cccd3e6f33333e7d99993e8600003e8d3334
    3e9466663e9b999a3ea2cccc3eaa00003eb133333eb866663ebf999a3ec6cccc3ece00003ed533333edc66663ee3999a
    3eeacccc3ef200003ef933323f0033333f03cccc3f0766663f0b00003f0e999a3f1233343f15cccd3f1966663f1d0000
    3f20999a3f2433343f27cccd3f2b66663f2f00003f32999a3f3633343f39cccd3f3d66663f4100003f44999a3f483333
    3f4bcccd3f4f66663f5300003f56999a3f5a33333f5dcccd3f6166663f6500003f68999a3f6c33333f6fcccd3f736666
    3f7700003f7a999a3f7e33333f800000"""),
    "uint8",
    source="bitsandbytes 0.50.2 create_dynamic_map() (signed, max_exponent_bits=7, total_bits=8), the code "
           "book of quantize_blockwise and of the double quantization of 4-bit absmax; dyn[0] = -0.99296874, "
           "dyn[127] = 0, dyn[255] = 1",
    derivation="dynamic_map(signed=True, max_exponent_bits=7, total_bits=8)",
)

for _t in (NF4, AF4, FP4_BNB, NF4_TORCHAO, DYNAMIC8):
    register_table(_t)

"""The MLIR quant type parser (mlir-types.md §2): ``parse_type(text)``, a lexer and a recursive-descent
``_Parser`` building UniformScheme / QuantileType / AnyType / CalibratedType records (printer: ``types``)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ...errors import QrefError
from ...formats import FloatFormat, Format, IntFormat, get_format
from ...schemes.uniform import UniformScheme, arithmetic_for, round_fraction
from .types import (
    _INT_TYPE,
    _U_KEYWORD,
    MAX_NESTING,
    MAX_STORAGE_BITS,
    MAX_TEXT,
    MLIR_FLOAT_NAMES,
    UNIFORM_FLOAT_STORAGE,
    UNSUPPORTED_FLOATS,
    AnyType,
    CalibratedType,
    MlirParseError,
    QuantileType,
    _default_range,
)


# ---------------------------------------------------------------------------------------------------------
# lexer
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Tok:
    kind: str  # 'id', 'int', 'float', 'punct', 'eof'
    text: str
    pos: int


_PUNCT = set("<>{}:,!-+")


def _lex(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c.isdigit():
            j = i
            if text.startswith(("0x", "0X"), i) and i + 2 < n and text[i + 2] in "0123456789abcdefABCDEF":
                j = i + 2
                while j < n and text[j] in "0123456789abcdefABCDEF":
                    j += 1
                toks.append(_Tok("int", text[i:j], i))
                i = j
                continue
            while j < n and text[j].isdigit():
                j += 1
            if j < n and text[j] == ".":
                j += 1
                while j < n and text[j].isdigit():
                    j += 1
                if j < n and text[j] in "eE":
                    k = j + 1
                    if k < n and text[k] in "+-":
                        k += 1
                    if k < n and text[k].isdigit():
                        while k < n and text[k].isdigit():
                            k += 1
                        j = k
                toks.append(_Tok("float", text[i:j], i))
            else:
                toks.append(_Tok("int", text[i:j], i))
            i = j
            continue
        if c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] in "_$."):
                j += 1
            toks.append(_Tok("id", text[i:j], i))
            i = j
            continue
        if c in _PUNCT:
            toks.append(_Tok("punct", c, i))
            i += 1
            continue
        if c == ".":
            raise MlirParseError("unexpected '.': a float literal needs a digit before the point (write 0.5)",
                                 text, i)
        raise MlirParseError(f"unexpected character {c!r}", text, i)
    toks.append(_Tok("eof", "", n))
    return toks


# ---------------------------------------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _lex(text)
        self.i = 0

    # -- token helpers --
    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def err(self, msg: str, pos: int | None = None) -> MlirParseError:
        return MlirParseError(msg, self.text, self.tok.pos if pos is None else pos)

    def _found(self) -> str:
        t = self.tok
        return "end of input" if t.kind == "eof" else repr(t.text)

    def accept(self, p: str) -> bool:
        if self.tok.kind == "punct" and self.tok.text == p:
            self.i += 1
            return True
        return False

    def expect(self, p: str, what: str = "") -> _Tok:
        t = self.tok
        if not self.accept(p):
            raise self.err(f"expected '{p}'{' ' + what if what else ''}, found {self._found()}")
        return t

    def peek_punct(self, p: str, k: int = 0) -> bool:
        t = self.toks[min(self.i + k, len(self.toks) - 1)]
        return t.kind == "punct" and t.text == p

    # -- literals --
    def integer(self, what: str = "integer") -> int:
        start = self.tok.pos
        neg = self.accept("-")
        t = self.tok
        if t.kind != "int":
            raise self.err(f"expected {what} (an integer literal), found {self._found()}")
        self.i += 1
        v = int(t.text, 16) if t.text[:2].lower() == "0x" else int(t.text)
        v = -v if neg else v
        if not -(2**63) <= v < 2**63:
            raise self.err(f"integer {v} does not fit in 64 bits", start)
        return v

    def float_(self, what: str = "float") -> tuple[float, int]:
        start = self.tok.pos
        neg = self.accept("-")
        t = self.tok
        if t.kind == "float":
            self.i += 1
            v = float(t.text)
            return (-v if neg else v), start
        if t.kind == "int" and t.text[:2].lower() == "0x":
            if neg:
                raise self.err("a hexadecimal float literal takes no leading minus", start)
            bits = int(t.text, 16)
            if bits >= 2**64:
                raise self.err("hexadecimal float literal out of range for f64", t.pos)
            self.i += 1
            return struct.unpack("<d", struct.pack("<Q", bits))[0], start
        if t.kind == "int":
            raise self.err(f"expected {what} (a float literal), found integer {t.text!r}: add a trailing dot "
                           f"({t.text}.0)")
        raise self.err(f"expected {what} (a float literal), found {self._found()}")

    # -- types --
    def ident(self, what: str) -> _Tok:
        t = self.tok
        if t.kind != "id":
            raise self.err(f"expected {what}, found {self._found()}")
        self.i += 1
        return t

    def float_type(self, what: str) -> tuple[FloatFormat, str]:
        t = self.tok
        if t.kind != "id" or (t.text not in MLIR_FLOAT_NAMES and t.text not in UNSUPPORTED_FLOATS):
            raise self.err(f"expected {what} (a float type such as f32, f16, bf16, f64), found {self._found()}")
        if t.text in UNSUPPORTED_FLOATS:
            raise self.err(f"{t.text} is a valid MLIR type but qref has no format for it")
        self.i += 1
        f = get_format(MLIR_FLOAT_NAMES[t.text])
        assert isinstance(f, FloatFormat)
        return f, t.text

    def storage(self, *, allow_u_keyword: bool, allowed_floats: tuple[str, ...] | None
                ) -> tuple[Format, str, int]:
        t = self.tok
        if t.kind != "id":
            raise self.err(f"expected a storage type (i8, si8, ui8, u8, f8E4M3FN...), found {self._found()}")
        m = _INT_TYPE.match(t.text)
        um = _U_KEYWORD.match(t.text)
        if m or (um and allow_u_keyword):
            width = int((m or um)[2] if m else um[1])  # type: ignore[index]
            if not 1 <= width <= MAX_STORAGE_BITS:
                raise self.err(f"illegal storage type size: {width} (quant storage has 1 to 32 bits)")
            signed = bool(m) and m[1] != "ui"
            self.i += 1
            fmt = get_format(f"{'int' if signed else 'uint'}{width}")
            return fmt, t.text, t.pos
        if um:
            raise self.err(f"expected a storage type; {t.text!r} is the uniform-only unsigned keyword, "
                           f"write ui{um[1]}")
        if t.text in MLIR_FLOAT_NAMES:
            if allowed_floats is not None and t.text not in allowed_floats:
                raise self.err(f"illegal storage type {t.text}: float storage is one of "
                               f"{', '.join(allowed_floats)}")
            self.i += 1
            return get_format(MLIR_FLOAT_NAMES[t.text]), t.text, t.pos
        raise self.err(f"expected a storage type (i8, si8, ui8, u8, f8E4M3FN...), found {t.text!r}")

    def storage_range(self, fmt: Format, type_pos: int) -> tuple[int, int] | None:
        if not self.peek_punct("<"):
            return None
        self.expect("<")
        lo_pos = self.tok.pos
        lo = self.integer("storage minimum")
        self.expect(":", "between storage minimum and maximum")
        hi_pos = self.tok.pos
        hi = self.integer("storage maximum")
        self.expect(">", "closing the storage range")
        dlo, dhi = _default_range(fmt)
        if lo < dlo:
            raise self.err(f"illegal storage type minimum: {lo} (below {dlo})", lo_pos)
        if hi > dhi:
            raise self.err(f"illegal storage type maximum: {hi} (above {dhi})", hi_pos)
        return lo, hi

    def scale(self, expressed: FloatFormat) -> float:
        v, pos = self.float_("scale")
        smin, smax = float(expressed.min_value), float(expressed.max_value)
        if not smin <= v <= smax:
            raise self.err(f"scale {v:e} out of expressed type range [{smin:e}, {smax:e}]", pos)
        return v

    def scale_zero(self, expressed: FloatFormat) -> tuple[float, int]:
        s = self.scale(expressed)
        z = self.integer("zero point") if self.accept(":") else 0
        return s, z

    def param_tensor(self, expressed: FloatFormat) -> tuple[list[float], list[int], list[int]]:
        """After '{': scale-zero list or nested lists; returns flat scales, zero points and dims."""
        scales: list[float] = []
        zps: list[int] = []
        sub: list[int] | None = None
        count = 0
        self.depth = getattr(self, "depth", 0) + 1
        if self.depth > MAX_NESTING:
            raise self.err(f"scale lists nested more than {MAX_NESTING} deep (a tensor of rank {MAX_NESTING} at "
                           "most; mlir-types.md §2.1 C6)")
        while True:
            if self.accept("{"):
                s2, z2, d2 = self.param_tensor(expressed)
                self.depth -= 1
                scales += s2
                zps += z2
            else:
                s, z = self.scale_zero(expressed)
                scales.append(s)
                zps.append(z)
                d2 = []
            if sub is None:
                sub = d2
            elif sub != d2:
                raise self.err("tensor literal is invalid; ranks are not consistent between elements")
            count += 1
            if self.accept(","):
                continue
            self.expect("}", "closing the scale list")
            return scales, zps, [count, *(sub or [])]

    # -- quant types --
    def parse(self) -> Any:
        self.expect("!", "starting a quant type")
        t = self.ident("a quant type name")
        kind = t.text
        if kind not in ("quant.uniform", "quant.quantile", "quant.any", "quant.calibrated"):
            raise self.err(f"unknown quant type {kind!r}; expected quant.uniform, quant.quantile, quant.any or "
                           "quant.calibrated", t.pos)
        name_pos = t.pos + len("quant.")
        if kind == "quant.uniform":
            out = self.uniform(name_pos)
        elif kind == "quant.quantile":
            out = self.quantile(name_pos)
        elif kind == "quant.any":
            out = self.any_type(name_pos)
        else:
            out = self.calibrated(name_pos)
        return out

    def finish(self) -> None:
        if self.tok.kind != "eof":
            raise self.err(f"expected end of input after the type, found {self._found()}")

    def uniform(self, name_pos: int) -> UniformScheme | QuantileType:
        self.expect("<", "after quant.uniform")
        if self.peek_punct("!"):
            inner = _Parser.__new__(_Parser)
            inner.text, inner.toks, inner.i = self.text, self.toks, self.i
            self.expect("!")
            t = self.ident("quant.quantile")
            if t.text != "quant.quantile":
                raise self.err(f"illegal storage type prefix: only !quant.quantile can be the storage of "
                               f"!quant.uniform, found !{t.text}", t.pos)
            q = self.quantile(t.pos + len("quant."))
            if not isinstance(q, QuantileType) or q.form != "upstream":
                raise self.err("the storage of !quant.uniform must be an upstream !quant.quantile<ST:QT, {...}>",
                               t.pos)
            storage_fmt: Format = q.storage
            spelling, rng = None, None
        else:
            q = None
            storage_fmt, spelling, spos = self.storage(allow_u_keyword=True, allowed_floats=UNIFORM_FLOAT_STORAGE)
            rng = self.storage_range(storage_fmt, spos)
        self.expect(":", "before the expressed type")
        expressed, _ = self.float_type("expressed type")
        axis: int | None = None
        blocks: list[tuple[int, int]] | None = None
        axis_pos = self.tok.pos
        if self.accept(":"):
            axis_pos = self.tok.pos
            if self.accept("{"):
                if isinstance(storage_fmt, FloatFormat):
                    raise self.err("sub-channel quantization needs integer storage (upstream MLIR builds its "
                                   "zero-point tensor as integers of the storage type and crashes on float "
                                   "storage)", axis_pos)
                blocks = []
                if not self.accept("}"):
                    while True:
                        bpos = self.tok.pos
                        a = self.integer("quantized dimension")
                        self.expect(":", "between dimension and block size")
                        b = self.integer("block size")
                        if a < 0:
                            raise self.err(f"illegal quantized dimension: {a}", bpos)
                        if b <= 0:
                            raise self.err(f"illegal block size: {b}", bpos)
                        blocks.append((a, b))
                        if self.accept(","):
                            continue
                        self.expect("}", "closing the block sizes")
                        break
            else:
                axis = self.integer("quantized dimension")
        self.expect(",", "before the quantization parameters")
        if blocks is None and axis is None:
            s, z = self.scale_zero(expressed)
            scales, zps, dims = [s], [z], []
        else:
            self.expect("{", "opening the list of scales")
            scales, zps, dims = self.param_tensor(expressed)
            if axis is not None and len(dims) != 1:
                raise self.err("per-axis parameters are a flat list {s:z, ...}", axis_pos)
        self.expect(">", "closing the quant type")
        if axis is not None and axis < 0:
            raise self.err(f"illegal quantized dimension: {axis}", axis_pos)
        width = storage_fmt.bits
        if blocks is not None:
            bad = [z for z in zps if not -(1 << (width - 1)) <= z < (1 << width)]
            if bad:
                raise self.err(f"sub-channel zero point {bad[0]} does not fit in {width}-bit storage (upstream MLIR "
                               "keeps it in an APInt of the storage width and prints an unreadable value)",
                               axis_pos)
            scales = [round_fraction(Fraction(s), expressed) for s in scales]
            zps = [_trunc_signed(z, width) for z in zps]
        if rng is not None and rng[0] >= rng[1]:
            raise self.err(f"illegal storage min and storage max: ({rng[0]}:{rng[1]})", name_pos)
        shape = tuple(dims) if (blocks is not None or axis is not None) else ()
        if q is not None:
            return QuantileType(storage=q.storage, lut=q.lut, quantile_type=q.quantile_type,
                                storage_range=q.storage_range, expressed=expressed, scales=tuple(scales),
                                zero_points=tuple(zps), scale_shape=shape, axis=axis,
                                block_size=None if blocks is None else tuple(blocks), form="upstream_uniform",
                                type_spelling=q.type_spelling)
        if isinstance(storage_fmt, IntFormat) and rng is not None and rng != storage_fmt.full_range:
            storage_fmt = get_format(f"{storage_fmt.name}<{rng[0]}:{rng[1]}>")
        frange = None
        if isinstance(storage_fmt, FloatFormat) and rng is not None and rng != _default_range(storage_fmt):
            frange = rng
        return UniformScheme(storage=storage_fmt, expressed=expressed, scales=tuple(scales), zero_points=tuple(zps),
                             scale_shape=shape, axis=axis, block_size=None if blocks is None else tuple(blocks),
                             profile="mlir", arithmetic=arithmetic_for("mlir"), storage_range=frange,
                             type_spelling=spelling)

    def lut(self) -> list[float]:
        self.expect("{", "opening the quantile table")
        vals: list[float] = []
        if self.accept("}"):
            return vals
        while True:
            v, _ = self.float_("quantile value")
            vals.append(v)
            if self.accept(","):
                continue
            self.expect("}", "closing the quantile table")
            return vals

    def quantile(self, name_pos: int) -> QuantileType:
        self.expect("<", "after quant.quantile")
        storage_fmt, spelling, spos = self.storage(allow_u_keyword=True, allowed_floats=None)
        range_pos = self.tok.pos
        rng = self.storage_range(storage_fmt, spos)
        self.expect(":", "after the storage type")
        t1 = self.tok
        if t1.kind == "id" and _INT_TYPE.match(t1.text):
            qt_fmt: Format = get_format(("int" if not t1.text.startswith("ui") else "uint")
                                        + _INT_TYPE.match(t1.text)[2])  # type: ignore[index]
            self.i += 1
            t1_is_float = False
        else:
            qt_fmt, _ = self.float_type("quantile or expressed type")
            t1_is_float = True
        expressed: FloatFormat | None = None
        axis: int | None = None
        form = None
        if self.accept(":"):
            if self.tok.kind == "int" or self.peek_punct("-"):
                if not t1_is_float:
                    raise self.err("expected a float expressed type before the axis", t1.pos)
                assert isinstance(qt_fmt, FloatFormat)
                expressed, qt_fmt, form = qt_fmt, None, "intel_legacy"  # type: ignore[assignment]
                axis = self.integer("quantized dimension")
            else:
                expressed, _ = self.float_type("expressed type")
                form = "intel"
                if self.accept(":"):
                    axis = self.integer("quantized dimension")
        self.expect(",", "before the quantile table")
        lut_pos = self.tok.pos
        table = self.lut()
        if form is None and self.peek_punct(":"):
            if not t1_is_float:
                raise self.err("expected a float expressed type", t1.pos)
            assert isinstance(qt_fmt, FloatFormat)
            expressed, qt_fmt, form = qt_fmt, None, "intel_legacy"  # type: ignore[assignment]
        if form is None:  # upstream: {LUT}[, <min:max>]>
            if _U_KEYWORD.match(spelling):
                raise self.err(f"expected a builtin storage type; upstream quantile types spell unsigned "
                               f"storage {spelling[0]}i{spelling[1:]} ({spelling!r} is the uniform/intel keyword)",
                               spos)
            if rng is not None:
                raise self.err("expected ':' (upstream quantile types take the range after the table: "
                               "!quant.quantile<ui4:f16, {...}, <0:7>>)", range_pos)
            if self.accept(","):
                self.expect("<", "opening the storage range")
                lo = self.integer("storage minimum")
                self.expect(":", "between storage minimum and maximum")
                hi = self.integer("storage maximum")
                self.expect(">", "closing the storage range")
                rng = (lo, hi)
            self.expect(">", "closing the quant type")
            if not table:
                raise self.err("quantile values must not be empty", name_pos)
            lo, hi = rng if rng is not None else _default_range(storage_fmt)
            if rng is not None and lo >= hi:
                raise self.err("storage min must be less than storage max", name_pos)
            if len(table) != hi - lo + 1:
                raise self.err(f"quantile LUT size ({len(table)}) must equal the number of representable storage "
                               f"values ({hi - lo + 1})", name_pos)
            if not isinstance(storage_fmt, IntFormat) and spelling not in MLIR_FLOAT_NAMES:
                raise self.err("storage type must be an integer or float type", spos)
            return QuantileType(storage=storage_fmt, lut=tuple(table), quantile_type=qt_fmt, storage_range=rng,
                                form="upstream", type_spelling=spelling)
        # intel forms: {LUT}:params
        self.expect(":", "between the quantile table and the scales")
        assert expressed is not None
        if axis is None:
            s, z = self.scale_zero(expressed)
            scales, zps, shape = [s], [z], ()
        else:
            self.expect("{", "opening the per-axis scales")
            scales, zps, dims = self.param_tensor(expressed)
            if len(dims) != 1:
                raise self.err("per-axis parameters are a flat list {s:z, ...}")
            shape = (dims[0],)
        self.expect(">", "closing the quant type")
        if not table:
            raise self.err("quantile values must not be empty", lut_pos)
        if rng is not None and rng[0] >= rng[1]:
            raise self.err(f"illegal storage min and storage max: ({rng[0]}:{rng[1]})", name_pos)
        if rng is not None and rng == _default_range(storage_fmt):
            rng = None
        if form == "intel":
            want = (1 << storage_fmt.bits) if rng is None else rng[1] - rng[0] + 1
            if len(table) != want:
                raise self.err(f"quantiles array size needs to be 2^(storage bits), or storage max - storage min "
                               f"+ 1 with a narrowed range; expected {want}, found {len(table)}", lut_pos)
        return QuantileType(storage=storage_fmt, lut=tuple(table), quantile_type=qt_fmt, storage_range=rng,
                            expressed=expressed, scales=tuple(scales), zero_points=tuple(zps), scale_shape=shape,
                            axis=axis, form=form, type_spelling=spelling)

    def any_type(self, name_pos: int) -> AnyType:
        self.expect("<", "after quant.any")
        fmt, spelling, spos = self.storage(allow_u_keyword=True, allowed_floats=UNIFORM_FLOAT_STORAGE)
        rng = self.storage_range(fmt, spos)
        expressed = None
        if self.accept(":"):
            expressed, _ = self.float_type("expressed type")
        self.expect(">", "closing the quant type")
        if rng is not None and rng[0] >= rng[1]:
            raise self.err(f"illegal storage min and storage max: ({rng[0]}:{rng[1]})", name_pos)
        if rng is not None and rng == _default_range(fmt):
            rng = None
        return AnyType(fmt, expressed, rng, spelling)

    def calibrated(self, name_pos: int) -> CalibratedType:
        self.expect("<", "after quant.calibrated")
        expressed, _ = self.float_type("expressed type")
        self.expect("<", "opening the calibrated range")
        lo, _ = self.float_("calibrated minimum")
        self.expect(":", "between calibrated minimum and maximum")
        hi, _ = self.float_("calibrated maximum")
        self.expect(">", "closing the calibrated range")
        self.expect(">", "closing the quant type")
        if not lo < hi:
            raise self.err(f"illegal min and max: ({lo:e}:{hi:e})", name_pos)
        return CalibratedType(expressed, lo, hi)


def _trunc_signed(v: int, width: int) -> int:
    """v as an APInt of ``width`` bits read back signed (what MLIR prints for sub-channel zero points)."""
    w = v & ((1 << width) - 1)
    return w - (1 << width) if w >= (1 << (width - 1)) else w


def parse_type(text: str, profile: str = "mlir") -> UniformScheme | QuantileType | AnyType | CalibratedType:
    """Parse an MLIR quant type (mlir-types.md §2). ``!quant.uniform`` gives a UniformScheme with the uniform
    ``profile`` (default ``mlir``: what ``lower-quant-ops`` computes; e.g. ``stablehlo`` for the StableHLO
    interpreter's arithmetic, mlir-types.md §1); ``!quant.quantile`` a QuantileType. Raises MlirParseError
    (position + expected token); a text longer than MAX_TEXT or nested deeper than MAX_NESTING is refused (§2.1 C6)."""
    if not isinstance(text, str):
        raise QrefError(f"parse_type expects a string, got {type(text).__name__}")
    if not isinstance(profile, str):
        raise QrefError(f"parse_type: profile must be a uniform profile name (e.g. 'mlir', 'stablehlo'), got "
                        f"{type(profile).__name__} {profile!r}")
    if len(text) > MAX_TEXT:
        raise QrefError(f"parse_type: the text is {len(text)} characters; a quant type is at most {MAX_TEXT}")
    p = _Parser(text)
    try:
        out = p.parse()
        p.finish()
    except RecursionError:  # pragma: no cover - MAX_NESTING stops the parser first
        raise QrefError("parse_type: the type is nested too deeply") from None
    if profile != "mlir":
        if not isinstance(out, UniformScheme):
            raise QrefError(f"parse_type: profile={profile!r} applies to !quant.uniform types; "
                            f"{type(out).__name__} records have no profile (use the default 'mlir')")
        from ...profiles import get_profile

        get_profile(profile, "uniform")  # unknown names raise with close matches
        from dataclasses import replace

        out = replace(out, profile=profile, arithmetic=arithmetic_for(profile))
    return out  # type: ignore[no-any-return]


__all__ = ["parse_type"]

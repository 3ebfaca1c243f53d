"""N-D tile block scaling: one scale per tile of ``block_shape`` elements (spec: docs/spec/block.md §12).

``qref.scheme("mxfp8_e4m3", block_shape=(32, 32), profile="nvidia")`` or
``qref.scheme("float8_e4m3fn", block_shape=(1, 128), scale_format="float32", ...)`` build a ``TiledScheme``: a
block scheme whose block is a tile. A tile is a 1-D block of ``prod(block_shape)`` elements taken in row-major
order of the tile (every block rule — amax, scale, element rounding — is order-free within a block), so

    TiledScheme(block, t).quantize(x) = untile(block.quantize(tile(pad(x)), axis=-1))

and ``block_shape=(k,)`` is exactly ``block.quantize(x, axis=-1)`` with ``block_size=k`` (block.md §12 C4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..core.encode import stochastic_random_bits
from ..core.exact import as_source_array
from ..errors import QrefError
from .base import QArray, Scheme, normalize_axis, register_family, scheme
from .block import BlockScheme
from .block.scheme import from_spec as block_from_spec
from .block.scheme import read_through


def _check_shape(block_shape: object) -> tuple[int, ...]:
    try:
        shape = tuple(block_shape)  # type: ignore[arg-type]
    except TypeError:
        raise QrefError(f"block_shape must be a tuple of positive integers, got {block_shape!r}") from None
    if not shape or any(isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1 for t in shape):
        raise QrefError(f"block_shape must be a non-empty tuple of positive integers, got {block_shape!r}")
    return tuple(int(t) for t in shape)


@dataclass(frozen=True)
class TiledScheme(Scheme):
    """A block scheme applied to N-D tiles (block.md §12).

    block: the block scheme of one tile (``block.block_size == prod(block_shape)``, C1); its ``pad`` rule decides
        partial tiles: "zero" pads every tiled axis with +0 up to a multiple of its tile extent (the pad
        elements are dropped from the codes; they change no amax), "error" rejects the input (C3).
    block_shape: tile extent per tiled axis, e.g. (128, 128), (1, 128), (16, 16), any rank.
    """

    block: BlockScheme
    block_shape: tuple[int, ...]
    family = "tiled"

    def __post_init__(self) -> None:
        if not isinstance(self.block, BlockScheme):
            raise QrefError(f"block must be a BlockScheme, got {type(self.block).__name__}")
        shape = _check_shape(self.block_shape)
        object.__setattr__(self, "block_shape", shape)
        if math.prod(shape) != self.block.block_size:
            raise QrefError(f"block_shape {shape} holds {math.prod(shape)} elements but the block scheme's "
                            f"block_size is {self.block.block_size}; they must be equal (block.md §12 C1)")

    name = read_through("block.name", "The block scheme's name (str).")
    profile = read_through("block.profile", "The block scheme's profile (None: built by hand).")
    bits = read_through("block.element.bits", "Bits per element code (int).")

    # ---- layout -------------------------------------------------------------------------------------------
    def _axes(self, ndim: int, axes: object) -> tuple[int, ...]:
        m = len(self.block_shape)
        if axes is None:
            if ndim < m:
                raise QrefError(f"block_shape {self.block_shape} tiles {m} axes; the input has {ndim}")
            return tuple(range(ndim - m, ndim))
        try:
            given = tuple(axes)  # type: ignore[arg-type]
        except TypeError:
            given = (axes,)
        if len(given) != m:
            raise QrefError(f"axes={axes!r} names {len(given)} axes; block_shape {self.block_shape} tiles {m}")
        out = tuple(normalize_axis(a, ndim) for a in given)  # type: ignore[arg-type]
        if len(set(out)) != m:
            raise QrefError(f"axes={axes!r} repeats an axis")
        return out

    def _plan(self, shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[tuple[int, ...], list[int]]:
        """(padded shape, permutation of the split array to (other axes, tile grid, tile inner))."""
        padded = list(shape)
        for a, t in zip(axes, self.block_shape):
            pad = (-shape[a]) % t
            if pad and self.block.pad == "error":
                raise QrefError(
                    f"the length {shape[a]} along axis {a} is not a multiple of its tile extent {t} "
                    f"(block_shape {self.block_shape}), and profile {self.block.profile!r} does not pad; pad the "
                    "input or pass pad='zero' (partial tiles padded with +0, block.md §12 C3)")
            padded[a] += pad
        # split axis a into (grid_a, inner_a) at positions 2a, 2a+1 of the split array; others stay whole
        pos, j = {}, 0
        for a in range(len(shape)):
            pos[a] = j
            j += 2 if a in axes else 1
        others = [pos[a] for a in range(len(shape)) if a not in axes]
        perm = others + [pos[a] for a in axes] + [pos[a] + 1 for a in axes]
        return tuple(padded), perm

    def _split_shape(self, padded: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
        out: list[int] = []
        for a, n in enumerate(padded):
            out += [n // self.block_shape[axes.index(a)], self.block_shape[axes.index(a)]] if a in axes else [n]
        return tuple(out)

    def _to_blocks(self, arr: np.ndarray, axes: tuple[int, ...], fill: Any) -> tuple[np.ndarray, Any]:
        padded, perm = self._plan(arr.shape, axes)
        if padded != arr.shape:
            widths = [(0, p - n) for n, p in zip(arr.shape, padded)]
            arr = np.pad(arr, widths, constant_values=fill)
        split = arr.reshape(self._split_shape(padded, axes))
        moved = split.transpose(perm)
        m = len(axes)
        grid_shape = moved.shape[: moved.ndim - m]
        return np.ascontiguousarray(moved).reshape((*grid_shape, self.block.block_size)), (padded, perm, grid_shape)

    def _from_blocks(self, blocks: np.ndarray, plan: Any, shape: tuple[int, ...], axes: tuple[int, ...]
                     ) -> np.ndarray:
        padded, perm, grid_shape = plan
        split_shape = self._split_shape(padded, axes)
        moved = blocks.reshape((*grid_shape, *(self.block_shape)))
        split = moved.transpose(np.argsort(perm)).reshape(split_shape).reshape(padded)
        return split[tuple(slice(0, n) for n in shape)]

    def _grid_to_axes(self, grid: np.ndarray, ndim: int, axes: tuple[int, ...]) -> np.ndarray:
        """(other axes..., grid axes in ``axes`` order) -> each grid extent at its axis's position."""
        others = [a for a in range(ndim) if a not in axes]
        order = others + list(axes)
        return grid.transpose(np.argsort(order))

    def _axes_to_grid(self, a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        others = [i for i in range(a.ndim) if i not in axes]
        return a.transpose(others + list(axes))

    # ---- quantize / dequantize ----------------------------------------------------------------------------
    def quantize(self, x: object, axes: object = None, global_scale: object = None, *, random_bits: object = None,
                 seed: object = None, threads: int | None = None, **kwargs: Any) -> QArray:
        """Quantize the tiles of ``x`` (block.md §12): ``axes`` are the tiled axes, one per ``block_shape``
        entry (default: the last ``len(block_shape)`` axes); global_scale as for the block scheme. random_bits /
        seed (stochastic rounding, block.md §13): R[i] rounds x[i] in x's own layout (broadcast to x's shape, or
        the seeded stream in x's C order), whatever the tiling; padding takes R = 0. threads: the block
        scheme's, whole tiles per chunk (elements.md §2.11)."""
        if kwargs:
            raise QrefError(f"TiledScheme.quantize takes axes=, global_scale=, threads=, random_bits= and seed=, "
                            f"got {sorted(kwargs)}")
        arr = as_source_array(x)
        ax = self._axes(arr.ndim, axes)
        blocks, plan = self._to_blocks(arr, ax, 0)
        rb = None
        if self.block.stochastic:
            assert self.block.stochastic_bits is not None
            r = stochastic_random_bits(arr.shape, self.block.stochastic_bits, random_bits, seed).reshape(arr.shape)
            rb = self._to_blocks(r, ax, 0)[0]
        elif random_bits is not None or seed is not None:
            raise QrefError(f"random_bits / seed are for stochastic rounding; {self.name} rounds "
                            f"{self.block.rounding!r} (pass rounding='stochastic_a', stochastic_bits=N)")
        q = self.block.quantize(blocks, axis=-1, global_scale=global_scale, random_bits=rb, threads=threads)

        def per_tile(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else self._grid_to_axes(a.reshape(plan[2]), arr.ndim, ax)

        return QArray(
            codes=self._from_blocks(q.codes, plan, arr.shape, ax),
            scheme=self,
            scales=per_tile(q.scales),
            biases=per_tile(q.biases),
            global_scale=q.global_scale,
            unspecified=self._from_blocks(q.unspecified, plan, arr.shape, ax),
            axis=None,
            meta={"input_dtype": q.meta["input_dtype"], "axes": ax, "shape": tuple(arr.shape),
                  "scales_unspecified": per_tile(q.meta["scales_unspecified"])},
        )

    def dequantize(self, q: QArray, dtype: object = np.float32, *, threads: int | None = None) -> np.ndarray:
        """Values of a QArray of this scheme as ``dtype``: each tile dequantized as the block scheme's block
        (threads: the block scheme's, elements.md §2.11)."""
        codes = np.asarray(q.codes)
        ax = tuple(q.meta.get("axes") or self._axes(codes.ndim, None))
        if codes.dtype.kind not in "iu":
            raise QrefError(f"codes of {self.name} are unsigned element codes, got dtype {codes.dtype}")
        blocks, plan = self._to_blocks(codes, ax, 0)
        grid = plan[2]

        def grid_of(a: np.ndarray | None, what: str) -> np.ndarray | None:
            if a is None:
                return None
            a = np.asarray(a)
            want = tuple(codes.shape[i] if i not in ax else -(-codes.shape[i] // self.block_shape[ax.index(i)])
                         for i in range(codes.ndim))
            if a.shape != want:
                raise QrefError(f"{what} of shape {a.shape} do not fit codes of shape {codes.shape} in tiles "
                                f"{self.block_shape}: expected {want}")
            return np.ascontiguousarray(self._axes_to_grid(a, ax)).reshape((*grid, 1))

        inner = QArray(codes=blocks, scheme=self.block, scales=grid_of(q.scales, "scales"),
                       biases=grid_of(q.biases, "biases"), global_scale=q.global_scale, axis=blocks.ndim - 1)
        v = self.block.dequantize(inner, dtype=dtype, threads=threads)
        return self._from_blocks(v, plan, codes.shape, ax)

    # ---- spec ---------------------------------------------------------------------------------------------
    def to_spec(self) -> dict[str, Any]:
        return {"family": "tiled", "block_shape": list(self.block_shape), "block": self.block.to_spec()}


def tiled_from_spec(spec: dict[str, Any]) -> TiledScheme:
    """Inverse of ``TiledScheme.to_spec``."""
    unknown = set(spec) - {"family", "block_shape", "block"}
    if unknown or "block" not in spec or "block_shape" not in spec:
        raise QrefError(f"a tiled scheme spec has the keys family, block_shape and block; got {sorted(spec)}")
    return TiledScheme(block_from_spec(dict(spec["block"])), _check_shape(spec["block_shape"]))


def tiled(name: Any, *, block_shape: object, **kwargs: Any) -> TiledScheme:
    """``qref.scheme(name, block_shape=..., ...)``: the block scheme of ``name`` with
    ``block_size = prod(block_shape)``, applied to tiles (block.md §12)."""
    shape = _check_shape(block_shape)
    if kwargs.get("block_size") not in (None, math.prod(shape)):
        raise QrefError(f"block_size={kwargs['block_size']!r} contradicts block_shape {shape}; give one of them")
    if kwargs.get("group_size") is not None:
        raise QrefError("give block_shape or group_size, not both")
    # a profile's block sizes constrain the tile's innermost extent, the run of elements along the last tiled
    # axis (block.md §12 C2: NVFP4 takes 16, so (1, 16) and (16, 16) tiles)
    kwargs["block_size"] = shape[-1]
    inner = scheme(name, **kwargs)
    if not isinstance(inner, BlockScheme):
        raise QrefError(f"block_shape applies to block schemes; {name!r} with {sorted(kwargs)} builds a "
                        f"{type(inner).__name__}")
    return TiledScheme(replace(inner, format=replace(inner.format, block_size=math.prod(shape))), shape)


register_family("tiled", builder=tiled, from_spec=tiled_from_spec, keywords=("block_shape",), order=0)

__all__ = ["TiledScheme", "tiled", "tiled_from_spec"]

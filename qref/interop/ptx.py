"""The random-bit operand of PTX ``cvt.rs`` split into one random integer per converted element (elements.md §6.2).

PTX ISA 9.0, instruction cvt, rbits paragraph: f16x2 takes the 13 LSBs of each 16-bit half (a: rbits[28:16],
b: rbits[12:0]); bf16x2 each 16-bit half (a: rbits[31:16], b: rbits[15:0]); e4m3x4 / e5m2x4 / e2m3x4 / e3m2x4 the
upper half for a and b, the lower half for e and f; e2m1x4 the upper byte of each half for a and b, the lower
byte of each half for e and f (qref's reading: a = rbits[31:24], b = rbits[15:8], e = rbits[23:16],
f = rbits[7:0]; the text does not say which of the two bytes is a's).
"""

from __future__ import annotations

import numpy as np

from ..errors import QrefError

# target -> per operand (shift, mask) of rbits; operand order a, b (, e, f) as in the instruction
_FIELDS: dict[str, tuple[tuple[int, int], ...]] = {
    "float16": ((16, 0x1FFF), (0, 0x1FFF)),
    "bfloat16": ((16, 0xFFFF), (0, 0xFFFF)),
    "float8_e4m3fn": ((16, 0xFFFF), (16, 0xFFFF), (0, 0xFFFF), (0, 0xFFFF)),
    "float8_e5m2": ((16, 0xFFFF), (16, 0xFFFF), (0, 0xFFFF), (0, 0xFFFF)),
    "float6_e2m3fn": ((16, 0xFFFF), (16, 0xFFFF), (0, 0xFFFF), (0, 0xFFFF)),
    "float6_e3m2fn": ((16, 0xFFFF), (16, 0xFFFF), (0, 0xFFFF), (0, 0xFFFF)),
    "float4_e2m1fn": ((24, 0xFF), (8, 0xFF), (16, 0xFF), (0, 0xFF)),
}
CVT_RS_TARGETS = tuple(_FIELDS)


def cvt_rs_random_bits(rbits: object, target: str) -> np.ndarray:
    """R[..., i] = (rbits >> shift_i) & mask_i: the random integer of operand i (a, b, e, f order) for a
    ``cvt.rs`` to ``target``; shape rbits.shape + (2,) for f16x2 / bf16x2, + (4,) for the x4 targets. Feed
    ``R`` with the matching inputs to ``qref.encode(..., profile="ptx_cvt_rs_satfinite", random_bits=R)``."""
    if target not in _FIELDS:
        raise QrefError(f"cvt.rs has no target {target!r}; use one of {', '.join(CVT_RS_TARGETS)}")
    r = np.asarray(rbits)
    if r.dtype.kind not in "iu":
        raise QrefError(f"rbits must be an integer array (the .b32 operand), got dtype {r.dtype}")
    if r.size and (int(r.min()) < 0 or int(r.max()) >= 1 << 32):
        raise QrefError("rbits must lie in [0, 2^32): it is the 32-bit operand of cvt.rs")
    r = r.astype(np.uint32)
    return np.stack([(r >> np.uint32(s)) & np.uint32(m) for s, m in _FIELDS[target]], axis=-1)


__all__ = ["CVT_RS_TARGETS", "cvt_rs_random_bits"]

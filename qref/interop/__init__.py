"""Interop with other systems' spellings of the same numbers: MLIR quant types (``mlir``) and packed storage
layouts (``packing``)."""

__all__: list[str] = []

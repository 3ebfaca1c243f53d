"""Subcommands of the ``qref`` CLI: one module per command, each with ``register(subparsers)``."""

__all__: list[str] = []

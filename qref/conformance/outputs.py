"""Output paths of the commands (docs/vectors.md §5.2): checked before the long work starts, never overwritten
without ``force``, never written through a symlink to a directory."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import QrefError


def _parent_ok(p: Path, option: str) -> None:
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise QrefError(f"{option} {p}: {parent} is a file, not a directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise QrefError(f"{option} {p}: the directory {parent} is not writable")
            return


def check_output_file(path: str | os.PathLike[str], option: str, force: bool) -> Path:
    """A file the command will write: not a directory, not an existing file unless ``force``, in a writable
    (or creatable) directory."""
    p = Path(path)
    if p.is_dir():
        raise QrefError(f"{option} {p}: is a directory; give a file name")
    if p.exists() or p.is_symlink():
        if not force:
            raise QrefError(f"{option} {p}: the file exists; pass --force to overwrite it")
        if not os.access(p, os.W_OK):
            raise QrefError(f"{option} {p}: the file is not writable")
    _parent_ok(p, option)
    return p


def check_output_dir(path: str | os.PathLike[str], option: str, force: bool, names: tuple[str, ...] = ()
                     ) -> Path:
    """A directory the command writes into: not a file; if it exists, ``names`` (the files it will write) must
    not exist, or (with ``names`` empty) it must be empty, unless ``force``."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise QrefError(f"{option} {p}: is a file, not a directory")
    if p.is_dir():
        clash = [n for n in names if (p / n).exists() or (p / n).is_symlink()] if names else (
            [e.name for e in p.iterdir()][:3])
        if clash and not force:
            raise QrefError(f"{option} {p}: {'it holds ' + ', '.join(clash)}; pass --force to overwrite"
                            + (" them" if names else " files in it"))
        if not os.access(p, os.W_OK | os.X_OK):
            raise QrefError(f"{option} {p}: the directory is not writable")
        for n in names:
            if (p / n).is_dir():
                raise QrefError(f"{option} {p}: {n} is a directory")
    else:
        _parent_ok(p, option)
    return p


__all__ = ["check_output_dir", "check_output_file"]

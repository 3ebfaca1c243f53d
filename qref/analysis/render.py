"""Plain tables of results: ``ReportTable`` (rows of dicts) as text, markdown, CSV, dicts or pandas."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import QrefError, unknown_name


def _fmt_cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v == 0:
            return "0"
        if v == int(v) and abs(v) < 1e6:
            return str(int(v))
        if len(repr(v)) <= 8:
            return repr(v)
        if abs(v) >= 1e4 or abs(v) < 1e-3:
            return f"{v:.3e}"
        return f"{v:.4g}"
    return str(v)


@dataclass
class ReportTable:
    """A plain table: ``rows`` (one dict per row, keys = ``columns``). ``as_dict()`` gives {column: [values]},
    ``to_pandas()`` a DataFrame (pandas optional), ``to_text()`` / ``to_markdown()`` / ``to_csv()`` formatted
    text; ``str(table)`` is ``to_text()`` and notebooks render it as markdown. The first column is the key."""

    rows: list[dict[str, Any]]
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.columns:
            self.columns = tuple(self.rows[0]) if self.rows else ()

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def row(self, key: str) -> dict[str, Any]:
        """The row whose first column equals ``key``."""
        k0 = self.columns[0]
        for r in self.rows:
            if r[k0] == key:
                return r
        raise unknown_name("row", key, [str(r[k0]) for r in self.rows])

    def column(self, name: str) -> list[Any]:
        if name not in self.columns:
            raise unknown_name("column", name, self.columns)
        return [r.get(name) for r in self.rows]

    def as_dict(self) -> dict[str, list[Any]]:
        return {c: self.column(c) for c in self.columns}

    def _like(self, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> ReportTable:
        return dataclasses.replace(self, rows=rows, columns=columns)

    def select(self, *columns: str) -> ReportTable:
        """The same rows with only ``columns`` (in that order)."""
        for c in columns:
            if c not in self.columns:
                raise unknown_name("column", c, self.columns)
        return self._like([{c: r.get(c) for c in columns} for r in self.rows], tuple(columns))

    def sorted(self, by: str, descending: bool = True) -> ReportTable:
        """Rows ordered by column ``by`` (None and NaN last)."""
        if by not in self.columns:
            raise unknown_name("column", by, self.columns)
        bad = [r for r in self.rows if r.get(by) is None or (isinstance(r.get(by), float) and math.isnan(r[by]))]
        good = [r for r in self.rows if not any(r is b for b in bad)]
        return self._like(sorted(good, key=lambda r: r[by], reverse=descending) + bad, self.columns)

    def to_pandas(self) -> Any:
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - depends on the environment
            raise QrefError("to_pandas() needs pandas (pip install pandas); as_dict() gives plain columns") from None
        return pd.DataFrame(self.as_dict(), columns=list(self.columns))

    def _cells(self) -> list[list[str]]:
        return [[_fmt_cell(r.get(c)) for c in self.columns] for r in self.rows]

    def to_text(self) -> str:
        cells = self._cells()
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(self.columns)]
        line = "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(self.columns, widths)))
        out = [line, "  ".join("-" * w for w in widths)]
        for row in cells:
            out.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
        return "\n".join(out)

    def to_markdown(self) -> str:
        out = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        out += ["| " + " | ".join(row) + " |" for row in self._cells()]
        return "\n".join(out)

    def to_csv(self) -> str:
        def cell(v: Any) -> str:
            return "" if v is None else repr(v) if isinstance(v, float) else str(v)

        return "\n".join([",".join(self.columns)] + [",".join(cell(r.get(c)) for c in self.columns)
                                                       for r in self.rows])

    def __str__(self) -> str:
        return self.to_text()

    def _repr_markdown_(self) -> str:  # notebooks render the table
        return self.to_markdown()


__all__ = ["ReportTable"]

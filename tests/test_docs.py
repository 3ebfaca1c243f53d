"""Generated documentation stays current."""

from pathlib import Path

from qref.commands.table import element_tables_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_element_tables_are_current() -> None:
    committed = (DOCS / "spec" / "element-tables.md").read_text()
    assert committed == element_tables_markdown(), "regenerate with: qref table --doc > docs/spec/element-tables.md"

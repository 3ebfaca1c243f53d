"""Generated documentation stays current."""

from pathlib import Path

from qref.commands.table import element_tables_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_element_tables_are_current() -> None:
    committed = (DOCS / "spec" / "element-tables.md").read_text()
    assert committed == element_tables_markdown(), "regenerate with: qref table --doc > docs/spec/element-tables.md"


def test_profile_catalogue_is_current() -> None:
    import qref.schemes  # noqa: F401  (registers every family's profiles)
    from qref.commands.profiles import profiles_markdown

    committed = (DOCS / "spec" / "profiles.md").read_text()
    assert committed == profiles_markdown(), "regenerate with: qref profiles --doc > docs/spec/profiles.md"

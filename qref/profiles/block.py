"""block profiles as data (spec: profiles.md); being moved here from qref/schemes."""

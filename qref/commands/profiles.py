"""``qref profiles``: every named profile (family, system reproduced, what it does, sources); ``--doc`` prints
docs/spec/profiles.md."""

from __future__ import annotations

import argparse

from ..profiles import FAMILIES, profiles

_SPEC_PAGES = {"element": "elements.md §6", "uniform": "uniform.md", "block": "block.md", "lookup": "lut.md",
               "recipe": "recipes.md"}


def profiles_markdown() -> str:
    """docs/spec/profiles.md: the catalogue of registered profiles, generated from the records."""
    lines = [
        "# Profiles (generated)",
        "",
        "A *profile* is a named, frozen record of every policy and arithmetic choice that reproduces one real system "
        "bit for bit (`qref.get_profile(name, family)`, code: `qref/profiles.py`). Profiles are data, not code "
        "paths: each family's scheme reads the fields it knows. The same name may exist in several families (the "
        "`mlx` element profile is `mx.to_fp8`, the `mlx` block profile is `mx.quantize`). This page is generated "
        "by `qref profiles --doc` from the registry; a test checks it is current.",
        "",
    ]
    for fam in FAMILIES:
        ps = profiles(fam)
        if not ps:
            continue
        lines += [f"## {fam} ({_SPEC_PAGES[fam]})", "", "| profile | reproduces | what it does | sources |",
                  "|---|---|---|---|"]
        for name, p in ps.items():
            desc = p.description.replace("|", "\\|").replace("\n", " ")
            src = "; ".join(p.sources).replace("|", "\\|")
            lines.append(f"| `{name}` | {p.system.replace('|', '/')} | {desc} | {src} |")
        lines.append("")
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    if args.doc:
        print(profiles_markdown(), end="")
        return 0
    for key, p in profiles(args.family).items():
        print(f"{key:32s} {p.system}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profiles", help="list the named profiles of real systems",
                       description="List every registered profile (family/name and the system it reproduces).")
    p.add_argument("--family", choices=FAMILIES, help="only this family")
    p.add_argument("--doc", action="store_true", help="print docs/spec/profiles.md")
    p.set_defaults(func=_run)

"""pytest plugin: qref property tests in a backend's own test suite, no glue (docs/testing-backends.md §4).

Loaded through the ``pytest11`` entry point ``qref`` (or ``pytest -p qref.pytest_plugin``). Options (the
command line first, then the ini key of the same name with underscores, then the default):

--qref-profile NAME      element profile the fixtures compare against (ini ``qref_profile``; default "spec")
--qref-formats A,B       formats ``qref_format`` is parametrized over (ini ``qref_formats``;
                         default "float8_e4m3fn,float8_e5m2")
--qref-max-examples N    hypothesis examples per ``qref_conforms`` call (ini ``qref_max_examples``;
                         default 200)
--qref-nan POLICY        NaN comparison policy: exact | same_sign | any_nan_code (ini ``qref_nan``;
                         default "exact")
--qref-seed N            seed of the search (ini ``qref_seed``; default none: hypothesis' own randomness)

Fixtures: ``qref_config`` (the resolved options), ``qref_profile`` (a profile name), ``qref_format`` (a format
record; the test runs once per format), ``qref_assert_codes`` / ``qref_assert_values`` (the assertions of
``qref.testing`` with the NaN policy filled in), ``qref_conforms`` (``assert_conforms`` with profile, format,
max_examples, NaN policy and seed filled in). The marker ``@pytest.mark.qref(profile=..., formats=[...])``
overrides the profile and formats of one test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from ..errors import QrefError
from ..formats import Format, get_format
from ..profiles import profiles
from .assertions import NAN_POLICIES, assert_codes_equal, assert_conforms, assert_values_equal

DEFAULTS = {"profile": "spec", "formats": "float8_e4m3fn,float8_e5m2", "max_examples": "200", "nan": "exact",
            "seed": ""}


@dataclass(frozen=True)
class QrefConfig:
    """The plugin's resolved options."""

    profile: str
    formats: tuple[str, ...]
    max_examples: int
    nan: str
    seed: int | None


_CONFIG_KEY = pytest.StashKey[QrefConfig]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("qref", "qref bit-exact property tests")
    helps = {
        "profile": "element profile the qref fixtures compare against (default: spec)",
        "formats": "comma-separated formats the qref_format fixture runs over "
                   "(default: float8_e4m3fn,float8_e5m2)",
        "max_examples": "hypothesis examples per qref_conforms call (default: 200)",
        "nan": f"NaN comparison policy, one of {', '.join(NAN_POLICIES)} (default: exact)",
        "seed": "seed of the qref_conforms search (default: none, hypothesis' own randomness)",
    }
    for key, text in helps.items():
        group.addoption(f"--qref-{key.replace('_', '-')}", dest=f"qref_{key}", default=None, help=text)
        parser.addini(f"qref_{key}", text, default=None)


def _option(config: pytest.Config, key: str) -> str:
    value = config.getoption(f"qref_{key}")
    if value is None:
        value = config.getini(f"qref_{key}")
    return DEFAULTS[key] if value in (None, "") else str(value)


def _usage(msg: str) -> pytest.UsageError:
    return pytest.UsageError(f"qref plugin: {msg}")


def _check_profile(name: str) -> str:
    recs = profiles().values()
    known = {p.key for p in recs} | {p.name for p in recs}  # NAME@TAG and the plain NAME (profiles.md §2)
    if name not in known:
        from ..errors import unknown_name

        raise _usage(str(unknown_name("profile", name, known)))
    return name


def _check_formats(names: object) -> tuple[str, ...]:
    if isinstance(names, str):
        items = [n.strip() for n in names.split(",")]
    else:
        items = [getattr(n, "name", str(n)) for n in names]  # type: ignore[attr-defined]
    items = [n for n in items if n]
    if not items:
        raise _usage("--qref-formats is empty; give at least one format name")
    for n in items:
        try:
            get_format(n)
        except QrefError as exc:
            raise _usage(str(exc)) from None
    return tuple(items)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "qref(profile=None, formats=None): override the qref profile / formats for this test")
    nan = _option(config, "nan")
    if nan not in NAN_POLICIES:
        raise _usage(f"--qref-nan must be one of {', '.join(NAN_POLICIES)}, got {nan!r}")
    raw_n, raw_seed = _option(config, "max_examples"), _option(config, "seed")
    try:
        n = int(raw_n)
        seed = int(raw_seed) if raw_seed else None
    except ValueError:
        raise _usage(f"--qref-max-examples / --qref-seed take integers, got {raw_n!r} / "
                     f"{raw_seed!r}") from None
    if n < 1:
        raise _usage(f"--qref-max-examples must be >= 1, got {n}")
    config.stash[_CONFIG_KEY] = QrefConfig(_check_profile(_option(config, "profile")),
                                           _check_formats(_option(config, "formats")), n, nan, seed)


def pytest_report_header(config: pytest.Config) -> str:
    from .. import __version__

    c = config.stash[_CONFIG_KEY]
    return (f"qref {__version__}: profile={c.profile}, formats={','.join(c.formats)}, nan={c.nan}, "
            f"max_examples={c.max_examples}, seed={c.seed}")


def _marker(node: Any) -> dict[str, Any]:
    m = node.get_closest_marker("qref")
    if m is None:
        return {}
    unknown = set(m.kwargs) - {"profile", "formats"}
    if m.args or unknown:
        raise _usage(f"@pytest.mark.qref takes profile=... and formats=[...] only, got args {m.args} and "
                     f"keywords {sorted(unknown)}")
    return dict(m.kwargs)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "qref_format" not in metafunc.fixturenames:
        return
    mk = _marker(metafunc.definition)
    names = _check_formats(mk["formats"]) if mk.get("formats") is not None else \
        metafunc.config.stash[_CONFIG_KEY].formats
    metafunc.parametrize("qref_format", names, indirect=True, ids=list(names))


@pytest.fixture(scope="session")
def qref_config(pytestconfig: pytest.Config) -> QrefConfig:
    """The plugin's options after command line / ini / defaults."""
    return pytestconfig.stash[_CONFIG_KEY]


@pytest.fixture
def qref_profile(request: pytest.FixtureRequest, qref_config: QrefConfig) -> str:
    """The profile name: @pytest.mark.qref(profile=...), else --qref-profile (default "spec")."""
    prof = _marker(request.node).get("profile")
    return _check_profile(prof) if prof is not None else qref_config.profile


@pytest.fixture
def qref_format(request: pytest.FixtureRequest) -> Format:
    """One format record per test run: the test is parametrized over --qref-formats (or the marker's)."""
    return get_format(request.param)


@pytest.fixture
def qref_assert_codes(qref_config: QrefConfig) -> Callable[..., None]:
    """qref.testing.assert_codes_equal(actual, expected, fmt, ...) with nan=--qref-nan by default."""

    def check(actual: object, expected: object, fmt: str | Format, **kw: Any) -> None:
        __tracebackhide__ = True
        kw.setdefault("nan", qref_config.nan)
        assert_codes_equal(actual, expected, fmt, **kw)

    return check


@pytest.fixture
def qref_assert_values(qref_config: QrefConfig) -> Callable[..., None]:
    """qref.testing.assert_values_equal(actual, expected, ...) with nan=--qref-nan by default."""

    def check(actual: object, expected: object, **kw: Any) -> None:
        __tracebackhide__ = True
        kw.setdefault("nan", qref_config.nan)
        assert_values_equal(actual, expected, **kw)

    return check


@pytest.fixture
def qref_conforms(request: pytest.FixtureRequest, qref_config: QrefConfig, qref_profile: str
                  ) -> Callable[..., None]:
    """assert_conforms(fn, target=None, **kw): target defaults to the test's qref_format; max_examples, nan
    and seed default to the plugin's options, and for a format target the profile too (the marker's first);
    scheme names and scheme objects keep their own profile unless profile= is passed."""

    def check(fn: Callable[[Any], Any], target: object = None, **kw: Any) -> None:
        __tracebackhide__ = True
        if target is None:
            if "qref_format" not in request.fixturenames:
                raise QrefError("qref_conforms(fn) without a target needs the qref_format fixture in the "
                                "test's arguments; or call qref_conforms(fn, 'float8_e4m3fn')")
            target = request.getfixturevalue("qref_format")
        try:  # the profile option is an element profile: it applies to format targets only
            get_format(target)  # type: ignore[arg-type]
            kw.setdefault("profile", qref_profile)
        except QrefError:
            pass
        kw.setdefault("max_examples", qref_config.max_examples)
        kw.setdefault("nan", qref_config.nan)
        kw.setdefault("seed", qref_config.seed)
        assert_conforms(fn, target, **kw)

    return check


__all__ = ["DEFAULTS", "QrefConfig", "pytest_addoption", "pytest_configure", "pytest_generate_tests",
           "pytest_report_header", "qref_assert_codes", "qref_assert_values", "qref_config", "qref_conforms",
           "qref_format", "qref_profile"]

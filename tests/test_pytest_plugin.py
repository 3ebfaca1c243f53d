"""The qref pytest plugin, run inside pytester sessions: options, ini keys, fixtures, marker, errors."""

from __future__ import annotations

from importlib.metadata import entry_points

# imported here, so that pytester's in-process runs find them in sys.modules (the runs drop what they import):
# numpy's C extension refuses a second import in one process, and a second copy of hypothesis' modules would
# not recognise the first copy's strategies
import hypothesis.strategies  # noqa: F401
import ml_dtypes  # noqa: F401
import numpy  # noqa: F401
import pytest

import qref.strategies
import qref.testing  # noqa: F401

pytest_plugins = ["pytester"]


def plugin_args() -> list[str]:
    """-p qref.pytest_plugin unless the pytest11 entry point already loads it (double registration fails).

    Warnings are errors, except pytest's note that the already imported qref cannot be assertion-rewritten.
    """
    installed = any(ep.value == "qref.pytest_plugin" for ep in entry_points(group="pytest11"))
    return ["-W", "error", "-W", "ignore::pytest.PytestAssertRewriteWarning"] + (
        [] if installed else ["-p", "qref.pytest_plugin"])


BACKEND = """
import ml_dtypes
import numpy as np

def ml_dtypes_cast(fmt):
    def cast(x):
        return x.astype(getattr(ml_dtypes, fmt.name))
    cast.__name__ = "ml_dtypes_astype"
    return cast
"""


def test_options_reach_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(BACKEND + """
import qref

def test_options(qref_config, qref_profile):
    assert qref_profile == "mlx"
    assert qref_config.formats == ("float8_e4m3fn", "float4_e2m1fn")
    assert (qref_config.max_examples, qref_config.nan, qref_config.seed) == (30, "any_nan_code", 3)

def test_format(qref_format):
    assert isinstance(qref_format, qref.FloatFormat)
    assert qref_format.name in ("float8_e4m3fn", "float4_e2m1fn")
""")
    result = pytester.runpytest(*plugin_args(), "-v", "--qref-profile", "mlx", "--qref-formats",
                                "float8_e4m3fn, float4_e2m1fn", "--qref-max-examples", "30", "--qref-nan",
                                "any_nan_code", "--qref-seed", "3")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["qref *: profile=mlx, formats=float8_e4m3fn,float4_e2m1fn, nan=any_nan_code, "
                                 "max_examples=30, seed=3",
                                 "*test_format?float8_e4m3fn? PASSED*", "*test_format?float4_e2m1fn? PASSED*"])


def test_defaults_and_ini(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
def test_defaults(qref_config, qref_profile):
    assert qref_profile == "saturating"          # from the ini file
    assert qref_config.formats == ("float8_e4m3fn", "float8_e5m2")
    assert (qref_config.max_examples, qref_config.nan, qref_config.seed) == (200, "exact", None)
""")
    pytester.makeini("[pytest]\nqref_profile = saturating\n")
    pytester.runpytest(*plugin_args()).assert_outcomes(passed=1)
    # the command line wins over the ini file
    pytester.makepyfile(test_cli="def test_cli(qref_profile):\n    assert qref_profile == 'spec'\n")
    pytester.runpytest(*plugin_args(), "--qref-profile", "spec", "test_cli.py").assert_outcomes(passed=1)


def test_conforms_fixture_runs_a_backend_over_the_formats(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(BACKEND + """
def test_ml_dtypes(qref_conforms, qref_format):
    qref_conforms(ml_dtypes_cast(qref_format))
""")
    # ml_dtypes astype from float32 = the spec profile for both default formats
    pytester.runpytest(*plugin_args(), "--qref-max-examples", "60", "--qref-seed", "0").assert_outcomes(passed=2)
    # against the saturating profile, E4M3FN (no Inf: overflow -> NaN in ml_dtypes) and E5M2 (-> Inf) differ
    result = pytester.runpytest(*plugin_args(), "--qref-profile", "saturating", "--qref-max-examples", "200",
                                "--qref-seed", "0")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*ml_dtypes_astype does not conform to float8_e4m3fn (profile 'saturating')*",
                                 "*saturate_vs_nan*", "*reproduce: import numpy as np*"])
    result.stdout.fnmatch_lines(["*does not conform to float8_e5m2 (profile 'saturating')*",
                                 "*saturate_vs_inf*"])


def test_marker_overrides_profile_and_formats(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(BACKEND + """
import pytest

@pytest.mark.qref(profile="ml_dtypes", formats=["float8_e8m0fnu"])
def test_e8m0(qref_conforms, qref_format, qref_profile):
    assert (qref_format.name, qref_profile) == ("float8_e8m0fnu", "ml_dtypes")
    qref_conforms(ml_dtypes_cast(qref_format))   # ml_dtypes E8M0 rounds ties up: its own profile

def test_explicit_target(qref_conforms):
    qref_conforms(ml_dtypes_cast(__import__("qref").get_format("float6_e3m2fn")), "float6_e3m2fn")

def test_no_target(qref_conforms):
    qref_conforms(lambda x: x)
""")
    result = pytester.runpytest(*plugin_args(), "--qref-max-examples", "60", "--qref-seed", "0")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*needs the qref_format fixture*"])


def test_assert_fixtures_use_the_nan_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
import numpy as np

def test_nan_codes(qref_assert_codes, qref_assert_values):
    qref_assert_codes(np.array([0x7F], np.uint8), np.array([0xFF], np.uint8), "float8_e4m3fn")
    qref_assert_values(np.array([0x7FC00001], np.uint32).view(np.float32),
                       np.array([0x7FC00000], np.uint32).view(np.float32))

def test_signed_zero(qref_assert_codes):
    qref_assert_codes(np.array([0x00], np.uint8), np.array([0x80], np.uint8), "float8_e4m3fn")
""")
    result = pytester.runpytest(*plugin_args(), "--qref-nan", "any_nan_code")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*signed_zero*"])
    pytester.runpytest(*plugin_args(), "-k", "nan_codes").assert_outcomes(failed=1)  # default nan="exact"


@pytest.mark.parametrize(("args", "message"), [
    (["--qref-profile", "mlxx"], "*unknown profile 'mlxx'; did you mean 'mlx'*"),
    (["--qref-formats", "float8_e4m3fm"], "*unknown format 'float8_e4m3fm'; did you mean*float8_e4m3fn*"),
    (["--qref-nan", "any"], "*--qref-nan must be one of exact, same_sign, any_nan_code*"),
    (["--qref-max-examples", "many"], "*take integers*"),
])
def test_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest(*plugin_args(), *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_help_lists_the_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*plugin_args(), "--help")
    result.stdout.fnmatch_lines(["*qref bit-exact property tests*", "*--qref-profile*", "*--qref-formats*",
                                 "*--qref-max-examples*", "*--qref-nan*", "*--qref-seed*"])

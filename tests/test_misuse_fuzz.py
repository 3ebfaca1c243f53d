"""Issue 30: a bounded, derandomized hypothesis fuzz of the entry points the issue names (dequantize of tampered
QArrays, requantize, scheme_from_spec of partial specs, stochastic options, mma.matmul's k_tile, the transforms'
sizes and dtypes, linear_step's recipe) and of `qref run --callable` / `verify` / `export` argument mixes: every
input gives a result or a QrefError, never another exception; a CLI call ends with a status, never a
traceback."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import traceback

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qref
from qref.cli import main
from qref.errors import QrefError

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
X = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
ODD = [None, 0, -1, 2**31, 2**40, 1.5, "8", "int8", True, np.float32(2.0), [1, 2], {"a": 1}, np.nan]


def _ok(fn, *args, **kwargs):
    try:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    except QrefError:
        return None
    except Exception as exc:  # anything else is a defect
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:300]
        pytest.fail(f"{getattr(fn, '__name__', fn)}{args!r:.200} {kwargs!r:.200}: {detail}")


SCHEMES = [qref.scheme("int8", scale=0.05), qref.scheme("int4", scale=[0.5] * 4, axis=0),
           qref.scheme("uint8", scale=0.1, zero_point=128), qref.scheme("nf4", block_size=8),
           qref.scheme("mxfp8_e4m3"), qref.scheme("float8_e4m3fn")]


@SETTINGS
@given(i=st.sampled_from(range(len(SCHEMES))), j=st.sampled_from(range(len(SCHEMES))),
       k=st.sampled_from(range(len(SCHEMES))), field=st.sampled_from(["codes", "scales", "zero_points"]),
       tamper=st.sampled_from(["float", "big", "neg", "shape", "none", "obj"]))
def test_dequantize_and_requantize(i, j, k, field, tamper):
    s = SCHEMES[i]
    q = s.quantize(X.reshape(1, 32) if i == 4 else X)
    v = getattr(q, field)
    if v is not None:
        v = np.asarray(v)
        bad = {"float": v.astype(np.float32) + 0.5, "big": v.astype(np.int64) + 10**6,
               "neg": v.astype(np.int64) - 10**6, "shape": v.reshape(-1)[:1], "none": None,
               "obj": np.array([object()] * max(v.size, 1))}[tamper]
        q = dataclasses.replace(q, **{field: bad})
    _ok(s.dequantize, q)
    _ok(qref.requantize, q, SCHEMES[j], SCHEMES[k])


@SETTINGS
@given(i=st.sampled_from(range(len(SCHEMES))), drop=st.sets(st.text("abcdefghijklmnopqrstuvwxyz_", max_size=12)),
       key=st.sampled_from(["family", "storage", "scales", "table", "block_size", "format", "expressed", "x"]),
       value=st.sampled_from(ODD))
def test_scheme_from_spec(i, drop, key, value):
    spec = SCHEMES[i].to_spec()
    for d in list(spec)[: len(drop)]:
        spec.pop(d)
    _ok(qref.scheme_from_spec, spec)
    _ok(qref.scheme_from_spec, {**SCHEMES[i].to_spec(), key: value})


@SETTINGS
@given(rounding=st.sampled_from(["nearest_even", "stochastic_a", "toward_zero", "bogus"]),
       bits=st.sampled_from([None, 0, 3, 8, 33, "8"]), seed=st.sampled_from([None, 0, -1, 1.5, 7]),
       rb=st.sampled_from([None, "ok", "float", "wide", "shape"]))
def test_stochastic_options(rounding, bits, seed, rb):
    r = {None: None, "ok": np.zeros(X.shape, np.uint32), "float": np.zeros(X.shape), "wide": np.full(X.shape, 2**40),
         "shape": np.zeros(3, np.uint32)}[rb]
    _ok(qref.quantize, X, "float8_e4m3fn", rounding=rounding, stochastic_bits=bits, seed=seed, random_bits=r)
    s = _ok(qref.scheme, "int8", scale=0.05, rounding=rounding, stochastic_bits=bits)
    if s is not None:
        _ok(s.quantize, X, seed=seed, random_bits=r)


@SETTINGS
@given(k_tile=st.sampled_from([None, 0, -16, 16, 32, 24, 1.5, "16", 2**40]),
       K=st.sampled_from([16, 32, 48]), promote=st.sampled_from([None, 0, 32, -32]))
def test_matmul_options(k_tile, K, promote):
    ins = qref.mma.gemm.resolve("Ampere/mma/m16n8k16.f32.bf16.bf16.f32")
    A = np.zeros((ins.m, K), ml_dtypes.bfloat16)
    B = np.zeros((K, ins.n), ml_dtypes.bfloat16)
    _ok(qref.mma.matmul, A, B, instruction=ins, k_tile=k_tile, promote_every=promote)


@SETTINGS
@given(n=st.sampled_from([1, 2, 3, 4, 2**20, 2**40, -4, 0, 4.0, "4", None]),
       dtype=st.sampled_from([np.int64, np.float32, str, object, "bogus", bool, None]),
       seed=st.sampled_from([0, -1, None, 1.5]))
def test_transforms(n, dtype, seed):
    _ok(qref.transforms.hadamard_matrix, n, dtype=dtype)
    _ok(qref.transforms.random_signs, n, seed)


@SETTINGS
@given(recipe=st.sampled_from([*sorted(qref.recipes.RECIPES)[:3], "bogus", 3, None, b"x"]),
       gemm=st.sampled_from(["float64", "exact", "bogus"]))
def test_linear_step_recipe(recipe, gemm):
    x, w, g = np.ones((2, 4), np.float32), np.ones((3, 4), np.float32), np.ones((2, 3), np.float32)
    _ok(qref.recipes.linear_step, x, w, g, recipe, gemm=gemm)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    from qref.conformance import Case, write_suite
    from qref.formats.policy import CastPolicy

    root = tmp_path_factory.mktemp("fz") / "suite"
    x = np.array([1.0, np.nan, -0.0, 500.0], dtype=np.float32)
    write_suite([Case(id="elements/f/a", family="elements", operation="encode", format="float8_e4m3fn",
                      policy=CastPolicy(), inputs={"x": x}, expected={"codes": qref.encode(x, "float8_e4m3fn")},
                      array_formats={"codes": "float8_e4m3fn"}, profiles=("spec",))], root, families=["elements"])
    mods = root.parent
    (mods / "good.py").write_text("import qref\ndef f(x, fmt):\n    return qref.encode(x, fmt)\n")
    (mods / "exits.py").write_text("import sys\ndef f(x, fmt):\n    sys.exit(0)\n")
    (mods / "bad.py").write_text("raise KeyError('x')\n")
    (mods / "wrong.py").write_text("def f(op, inputs, spec):\n    return 3\n")
    return root


def test_cli_run_verify_export(suite):
    d = suite.parent

    @settings(SETTINGS, max_examples=40)
    @given(cmd=st.sampled_from([
        ["run", "--suite", str(suite), "-q", "--no-xfail", "--callable"], ["verify", str(suite)],
        ["export", str(suite)]]),
        words=st.lists(st.sampled_from([
            f"{d}/good.py:f", f"{d}/exits.py:f", f"{d}/bad.py:f", f"{d}/wrong.py:f", f"{d}/nope.py:f", "os:getcwd",
            "--family", "elements", "uniform", "--include", "nomatch/*", "*", "--exclude", "--recompute",
            "--allow-extra", "--jsonl", str(suite / "manifest.json"), str(d / "o.jsonl"), "--hex", str(suite),
            str(d / "hex"), "--force", "--policy", "overflow=saturate", "bogus", "--profile", "mlx"]), max_size=5))
    def run(cmd, words):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = _ok(main, [*cmd, *words])
            except SystemExit as exc:  # argparse usage errors
                rc = exc.code
        assert "Traceback" not in err.getvalue(), err.getvalue()
        assert rc is None or isinstance(rc, int)
        assert qref.conformance.verify_suite(suite).ok  # never written into

    run()

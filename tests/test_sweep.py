"""Exhaustive sweeps: the fast paths equal the reference path on every 16-bit source, qref equals ml_dtypes on
all 2^32 float32 inputs, mismatch classes, the process pool and a Dask LocalCluster."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import qref
from qref.analysis.sweep import classify, sweep, sweep_many

SMALL = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float8_e4m3",
         "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu", "bfloat16", "float16",
         "int8", "uint4"]


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("source", ["float16", "bfloat16"])
def test_16bit_fast_path_equals_reference_exhaustively(name: str, source: str) -> None:
    for options in ({}, {"rounding": "toward_zero", "overflow": "saturate"}):
        r = sweep(name, against="reference", source=source, workers=1, **options)
        assert (r.total, r.mismatches) == (65536, 0), r.summary()


def test_mismatch_classes() -> None:
    r = sweep("float8_e8m0fnu", against="ml_dtypes", source="bfloat16", workers=1)  # spec: ties to even
    assert set(r.by_class) == {"one_ulp", "saturation_vs_inf_nan"}, r.summary()  # ties; 1.5*2^127 -> max vs NaN
    r2 = sweep("float8_e8m0fnu", against="ml_dtypes", source="bfloat16", workers=1, profile="ml_dtypes")
    assert r2.mismatches == 0
    r3 = sweep("float8_e4m3fn", against="ml_dtypes", source="float16", workers=1, overflow="saturate")
    assert set(r3.by_class) == {"saturation_vs_inf_nan"}, r3.summary()
    assert sweep("float16", against="ml_dtypes", source="bfloat16", workers=1).mismatches == 0
    f16 = qref.get_format("float16")
    got = classify(f16, np.array([0x7E00, 0x8000, 0x7C00, 0x3C01, 0x7E00]), np.array([0x7E01, 0x0000, 0x7BFF,
                                                                                      0x3C00, 0x3C00]))
    assert list(got) == ["nan_code", "sign_of_zero", "saturation_vs_inf_nan", "one_ulp", "nan_vs_value"]


def test_against_torch() -> None:
    """torch's tensor.to() as the other side: the torch profile gives 0 mismatches on every float16 input; the
    spec default differs exactly at the NaNs (torch writes E5M2 NaN as 0x7F / 0xFF, elements.md §6.5)."""
    pytest.importorskip("torch", reason="torch is not installed")
    assert sweep("float8_e5m2", against="torch", source="float16", workers=1, profile="torch").mismatches == 0
    r = sweep("float8_e5m2", against="torch", source="float16", workers=1)
    assert (r.mismatches, set(r.by_class)) == (2046, {"nan_code"}), r.summary()  # 2 x (2^10 - 1) NaN patterns
    with pytest.raises(qref.QrefError, match=r"torch has no tensor\.to\(\)"):
        sweep("float4_e2m1fn", against="torch", source="float16", workers=1)


def test_process_pool_and_limit() -> None:
    r = sweep("float8_e4m3fn", against="ml_dtypes", limit=1 << 24, workers=2, chunk_bits=22)
    assert (r.total, r.mismatches) == (1 << 24, 0)


def test_dask_local_cluster() -> None:
    distributed = pytest.importorskip("dask.distributed", reason="the dask extra is not installed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        jobs = [{"fmt": "float4_e2m1fn", "against": "reference"}, {"fmt": "float8_e5m2", "against": "ml_dtypes"},
                {"fmt": "float8_e8m0fnu", "against": "ml_dtypes", "profile": "ml_dtypes"}]
        results = sweep_many(jobs, dask_address=c.scheduler_address, limit=1 << 22, chunk_bits=20)
    assert [(r.total, r.mismatches) for r in results] == [(1 << 22, 0)] * 3


def test_bad_options_fail_before_starting() -> None:
    with pytest.raises(qref.QrefError, match="did you mean 'ml_dtypes'"):
        sweep("float8_e4m3fn", against="ml_dtype")
    with pytest.raises(qref.QrefError, match="has no NaN"):
        sweep("float4_e2m1fn", overflow="nan")


@pytest.mark.slow
def test_all_float32_inputs_e4m3fn_against_ml_dtypes() -> None:
    """The issue's acceptance run: all 2^32 float32 inputs, zero mismatches (about 30 s on two cores)."""
    r = subprocess.run([sys.executable, "-m", "qref", "sweep", "float8_e4m3fn", "--against", "ml_dtypes",
                        "--quiet"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4294967296 inputs, 0 mismatches" in r.stdout

"""Profiles held bit for bit to peer vectors the real code produced (profiles.md §5): tests/peers/<system>_<tag>/
(vectors.npz + manifest.json, written by scripts/peers/*). Currently: ml_dtypes 0.6.0 for ``ml_dtypes@0.6``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import qref

PEERS = Path(__file__).parent / "peers"
ML_DTYPES_DIRS = sorted(PEERS.glob("ml_dtypes_*"))


def _load(d: Path) -> tuple[dict, dict[str, np.ndarray]]:
    manifest = json.loads((d / "manifest.json").read_text())
    raw = (d / "vectors.npz").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == manifest["sha256"], f"{d}: vectors.npz does not match its manifest"
    with np.load(d / "vectors.npz", allow_pickle=False) as z:
        return manifest, {k: z[k] for k in z.files}


def _inputs(arrays: dict[str, np.ndarray], fmt: str, which: str) -> np.ndarray:
    if which == "all_float16":
        return np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    if which == "all_bfloat16":
        return np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    if which in ("random_float32", "random_float64"):
        return arrays[f"in/{which}"].view(which.split("_")[1])
    if which.startswith("ties_"):
        return arrays[f"in/{fmt}/{which}"].view(which.split("_")[1])
    if which == "int_float64":
        return arrays["in/int_float64"].view(np.float64)
    if which == "int_float32":
        return arrays["in/int_float64"].view(np.float64).astype(np.float32)
    raise AssertionError(f"unknown input set {which!r}")


def test_peer_directories_exist() -> None:
    assert [d.name for d in ML_DTYPES_DIRS] == ["ml_dtypes_0.6"]


@pytest.mark.parametrize("d", ML_DTYPES_DIRS, ids=lambda d: d.name)
def test_ml_dtypes_record_equals_its_peer_vectors(d: Path) -> None:
    manifest, arrays = _load(d)
    profile = manifest["profile"]
    rec = qref.get_profile(profile)
    assert rec.covers(manifest["version"]), f"{profile} does not claim ml_dtypes {manifest['version']}"
    compared = 0
    failures = []
    for key, want in arrays.items():
        if key.startswith("in/"):
            continue
        fmt, which = key.split("/")
        x = _inputs(arrays, fmt, which)
        got = qref.encode(x, fmt, profile=profile)
        want = want.astype(np.uint64)
        got = got.astype(np.uint64)
        if fmt in ("float16", "bfloat16"):  # numpy keeps NaN payloads; qref emits the canonical NaN (§2.7)
            nan_code = qref.decode(want.astype(np.uint16), fmt, dtype=np.float32)
            keep = ~np.isnan(nan_code)
            assert np.isnan(qref.decode(got[~keep].astype(np.uint16), fmt, dtype=np.float32)).all(), key
            want, got = want[keep], got[keep]
        bad = np.flatnonzero(want != got)
        compared += want.size
        if bad.size:
            i = bad[0]
            failures.append(f"{key}: {bad.size} mismatches, e.g. input #{i} want {want[i]:#x} got {got[i]:#x}")
    assert not failures, "\n".join(failures)
    assert compared > 5_000_000

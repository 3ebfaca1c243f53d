"""Profile records: version resolution and drift (profiles.md §2), cast rules (§4), and the vocabulary rule:
no field value of any record names a system (§1)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pytest

import qref
from qref.errors import QrefError
from qref.profiles import STATUSES, Profile, records, resolve_profile

# Names of systems and libraries: a profile record may mention them in its name, system, description, sources and
# evidence, never in a field that selects a mechanism.
SYSTEM_WORDS = ("ml_dtypes", "mlx", "jax", "xla", "nvidia", "torchao", "torch", "pytorch", "onnx", "tflite",
                "openvino", "qwix", "aqt", "bitsandbytes", "bnb", "microxcaling", "iree", "stablehlo", "flax",
                "transformer_engine", "cublas", "cuda")
TEXT_FIELDS = {"name", "system", "description", "sources", "evidence", "package", "versions", "version", "status"}


def test_plain_name_picks_the_record_covering_the_installed_version() -> None:
    assert resolve_profile("ml_dtypes", installed="0.6.0").profile.key == "ml_dtypes@0.6"
    assert resolve_profile("ml_dtypes", installed="0.5.1").profile.key == "ml_dtypes@0.6"
    r = resolve_profile("ml_dtypes", installed="0.7.0")
    assert r.profile.key == "ml_dtypes@0.7" and not r.drift


def test_newer_than_every_record_is_drift_against_the_newest() -> None:
    r = resolve_profile("ml_dtypes", installed="0.9.1")
    assert r.drift and r.profile.key == "ml_dtypes@0.7"
    assert "drift" in r.note and "0.9.1" in r.note
    forced = resolve_profile("ml_dtypes@0.6", installed="0.7.0")
    assert forced.drift and forced.profile.key == "ml_dtypes@0.6"


def test_explicit_tags_and_errors() -> None:
    assert qref.get_profile("ml_dtypes@0.6").versions == ">=0.5,<0.7"
    with pytest.raises(QrefError, match=r"ml_dtypes@0\.7"):
        qref.get_profile("ml_dtypes@0.8")
    assert [p.key for p in records("ml_dtypes", "element")] == ["ml_dtypes@0.6", "ml_dtypes@0.7"]
    with pytest.raises(QrefError, match="PEP 440"):
        Profile("x", "element", "s", "d", package="p", versions="not a range")
    with pytest.raises(QrefError, match="status"):
        Profile("x", "element", "s", "d", status="trust me")


def test_cast_rules_select_by_target_and_source() -> None:
    import ml_dtypes

    # numpy's own float16 -> int8 cast wraps (the C cast); ml_dtypes 0.7's bfloat16 -> int8 gives 0 out of range
    assert list(qref.encode(np.array([200.0], np.float16), "int8", profile="ml_dtypes@0.7")) == [200]
    b = np.array([200.0, -3.5, np.inf], ml_dtypes.bfloat16)
    assert list(qref.encode(b, "int8", profile="ml_dtypes@0.7").astype(int)) == [0, 0xFD, 0]
    assert list(qref.encode(b, "int8", profile="ml_dtypes@0.6").astype(int)) == [200, 0xFD, 0]
    x16 = np.array([20.0, -7.5, np.nan], np.float16)  # into int4 (ml_dtypes' own type): -7 is 0b1001
    assert list(qref.encode(x16, "int4", profile="ml_dtypes@0.7").astype(int)) == [0, 0x9, 0]
    assert list(qref.encode(x16, "int4", profile="ml_dtypes@0.6").astype(int)) == [20 % 16, 0x9, 0]


def test_every_record_is_complete() -> None:
    for key, p in qref.profiles().items():
        assert p.status in STATUSES, key
        assert p.sources, f"{key}: no sources"
        if p.status in ("verified", "peer_vectors"):
            assert p.evidence, f"{key}: status {p.status} needs evidence (test, inputs, mismatches)"
        if p.status == "verified":  # run live in CI: the installed package's version selects the record
            assert p.package and p.versions, f"{key}: a verified record names the versions it reproduces"


def _values(obj: object, path: str):
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _values(getattr(obj, f.name), f"{path}.{f.name}")
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _values(k, f"{path}[key]")
            yield from _values(v, f"{path}[{k!r}]")
    elif isinstance(obj, (tuple, list, set, frozenset)):
        for i, v in enumerate(obj):
            yield from _values(v, f"{path}[{i}]")
    elif isinstance(obj, str):
        yield path, obj


def test_no_field_value_names_a_system() -> None:
    bad = []
    for key, p in qref.profiles().items():
        for f in dataclasses.fields(p):
            if f.name in TEXT_FIELDS:
                continue
            for path, v in _values(getattr(p, f.name), f"{key}.{f.name}"):
                words = v.lower().replace("-", "_").split("_")
                hit = [w for w in SYSTEM_WORDS if w == v.lower() or w in words or v.lower().startswith(w + "_")]
                if hit:
                    bad.append(f"{path} = {v!r}")
    assert not bad, "field values naming systems (name the mechanism instead):\n" + "\n".join(bad)


def test_harness_reports_drift_not_failure() -> None:
    """With the installed ml_dtypes' record the E8M0 tasks conform; forcing the 0.6 record turns its differences
    into drift (exit status 3), never into unexpected failures (profiles.md §2)."""
    from qref.cli import main
    from qref.harness import runner

    inc = ["elements/float8_e8m0fnu/*", "elements/int4/*"]
    live = runner.run(["ml_dtypes"], include=inc, isolate=False)
    assert live.ok and not live.drifted and live.results
    assert {t.profile for t in live.targets} == {qref.get_profile("ml_dtypes").key}
    other = "ml_dtypes@0.6" if qref.get_profile("ml_dtypes").key == "ml_dtypes@0.7" else "ml_dtypes@0.7"
    forced = runner.run(["ml_dtypes"], include=inc, isolate=False, records={"ml_dtypes": other})
    assert forced.drifted and not forced.unexpected and forced.ok
    assert all(t.drift for t in forced.targets)
    argv = ["run", "--backend", "ml_dtypes", "-q", "--record", other] + [a for p in inc for a in ("--include", p)]
    assert main(argv) == 3

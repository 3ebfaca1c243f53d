"""The helpers the adapters and families share: run_element_groups (one prepare per signature, its failure the result
of the whole group), per_case (a runner calling a function on each case), unsupported_reason / raise_unsupported,
uniform_input / first_literal (the array a uniform case runs on, a reproducer's one-element literal), row_snippet (the
reproducer of one element of a torch weight-only matmul from its row of x), distinct_alternatives (first of equal
override sets, no-ops and failures skipped) and value_classes (NaN and sign-of-zero classes of float outputs)."""

from __future__ import annotations

import numpy as np

from qref.conformance.case import Case
from qref.harness.adapters._common import (
    array_literal,
    first_literal,
    literal_imports,
    per_case,
    raise_unsupported,
    row_snippet,
    run_element_groups,
    uniform_input,
    unsupported_reason,
)
from qref.harness.families import distinct_alternatives, value_classes
from qref.harness.model import Unsupported


def _quantize_case(i: int, fmt: str, x: list[float]) -> Case:
    a = np.array(x, np.float32)
    return Case(id=f"elements/{fmt}/{i}", family="elements", operation="quantize", inputs={"x": a},
                expected={"y": a.copy()}, format={"name": fmt})


def test_run_element_groups_prepares_once_per_signature() -> None:
    cases = [_quantize_case(0, "float8_e4m3fn", [1.0, -2.5]), _quantize_case(1, "float8_e5m2", [3.0]),
             _quantize_case(2, "float8_e4m3fn", [0.5]), _quantize_case(3, "float8_e5m2", [7.0, 8.0, 9.0])]
    prepared: list[str] = []

    def prepare(sig: tuple[str, str, str, str]) -> float:
        prepared.append(sig[1])
        if sig[1] == "float8_e5m2":
            raise RuntimeError("no kernel")
        return 2.0

    def call(factor: float, sig: object, x: np.ndarray) -> np.ndarray:
        if x.size == 1:
            raise ValueError("one element")
        return x * np.float32(factor)

    out = run_element_groups(cases, prepare, call)
    assert sorted(prepared) == ["float8_e4m3fn", "float8_e5m2"]
    assert out[0]["y"].tolist() == [2.0, -5.0]  # each case on its own input, in its own slot
    assert isinstance(out[2], ValueError)
    assert isinstance(out[1], RuntimeError) and out[1] is out[3]  # the group's failure, for each of its cases


def test_per_case_runs_each_case_and_keeps_its_exception() -> None:
    cases = [_quantize_case(i, "float8_e4m3fn", [float(i)]) for i in range(3)]

    def one(case: Case) -> dict[str, np.ndarray]:
        if case.id.endswith("/1"):
            raise Unsupported("case 1 is not supported")
        return {"y": case.inputs["x"] * np.float32(2)}

    out = per_case(one)(cases)
    assert len(out) == 3
    assert out[0]["y"].tolist() == [0.0] and out[2]["y"].tolist() == [4.0]
    assert isinstance(out[1], Unsupported) and str(out[1]) == "case 1 is not supported"


def test_supports_from_a_check() -> None:
    def check(case: object) -> None:
        if case == "bad":
            raise Unsupported("no such type")
        if case == "broken":
            raise KeyError("a bug is not a reason")

    supports = unsupported_reason(check)
    assert supports("good") is None
    assert supports("bad") == "no such type"
    try:
        supports("broken")
    except KeyError:
        pass
    else:
        raise AssertionError("only Unsupported is a reason")
    raise_unsupported(None)
    raise_unsupported("")
    try:
        raise_unsupported("needs AVX512-BF16")
    except Unsupported as exc:
        assert str(exc) == "needs AVX512-BF16"
    else:
        raise AssertionError("a reason must raise")


def test_uniform_input_is_x_of_a_quantize_case_else_the_storage_values() -> None:
    x = np.array([[0.5, -1.25, 3.0]], np.float32)
    q = Case(id="uniform/t/q", family="uniform", operation="uniform_quantize", inputs={"x": x},
             expected={"codes": np.zeros(x.shape, np.uint8)}, scheme={"storage": "int4"})
    got = uniform_input(q)
    assert got.dtype == np.float32 and got.shape == (1, 3) and got.tolist() == x.tolist()
    codes = np.array([0x0, 0x7, 0x8, 0xF], np.uint8)  # int4 two's complement: c - 16 where c >= 8
    d = Case(id="uniform/t/d", family="uniform", operation="uniform_dequantize", inputs={"codes": codes},
             expected={"y": np.zeros(4, np.float32)}, scheme={"storage": "int4"})
    got = uniform_input(d)
    assert got.dtype == np.int8 and got.tolist() == [0, 7, -8, -1]


def test_first_literal_writes_element_0_bit_for_bit() -> None:
    neg_zero = np.array([-0.0, 1.0], np.float32)
    src = first_literal(neg_zero)
    y = eval(src, {"np": np})
    assert y.dtype == np.float32 and y.view(np.uint32).tolist() == [0x80000000]
    assert first_literal(np.array([-3, 4], np.int8)) == "np.array([-3], np.int8)"
    import ml_dtypes

    bf = np.array([0x8001, 0x3F80], np.uint16).view(ml_dtypes.bfloat16)  # a negative subnormal bfloat16
    src = first_literal(bf)
    assert literal_imports("import numpy as np", src) == "import numpy as np, ml_dtypes"
    assert literal_imports("import numpy as np", "np.array([1], np.int8)") == "import numpy as np"
    y = eval(src, {"np": np, "ml_dtypes": ml_dtypes})
    assert y.dtype == bf.dtype and y.view(np.uint16).tolist() == [0x8001]


def test_distinct_alternatives() -> None:
    alts = [("tie_rule", {"rounding": "nearest_away"}), ("scale_rule", {"scale": 2}),
            ("again", {"rounding": "nearest_away"}), ("fails", {"scale": 0}), ("noop", {"scale": 1}),
            ("compute_precision", {"scale": 3, "rounding": "up"})]

    def outputs(ov: dict) -> int:
        return 12 // ov.get("scale", 1)

    got = list(distinct_alternatives(alts, outputs, lambda ov: ov == {"scale": 1}))
    assert got == [("tie_rule", 12), ("scale_rule", 6), ("compute_precision", 4)]


def test_row_snippet_prints_the_element_of_its_row() -> None:
    import subprocess
    import sys

    x = np.array([[1.0, 2.0, 3.0], [-4.0, 0.5, 6.0]], np.float32)  # (M, K) = (2, 3)
    w = np.arange(12, dtype=np.float32).reshape(4, 3) - 5  # the codes: N = 4 rows
    case = Case(id="matmul/w/0", family="matmul", operation="weight_only_matmul", inputs={"x": x, "codes": w},
                expected={"y": np.zeros((2, 4), np.float32)})
    head = "import warnings, numpy as np, torch; warnings.simplefilter('ignore')"
    for i in (0, 3, 4, 7):
        src = row_snippet(head, case, i, f"w = torch.from_numpy({array_literal(w)}.copy())",
                          "y = torch.nn.functional.linear(x, w)")
        assert src.splitlines()[0] == head
        r = subprocess.run([sys.executable, "-"], input=src, capture_output=True, text=True, timeout=300)
        m, n = divmod(i, 4)
        exact = sum(float(x[m, k]) * float(w[n, k]) for k in range(3))  # small integers and halves: exact
        assert r.stdout.split() == [hex(int(np.array([exact], np.float32).view(np.uint32)[0]))], (i, r.stderr)


def test_value_classes_of_float_outputs() -> None:
    nan, inf = float("nan"), float("inf")
    exp = np.array([nan, 1.0, 0.0, -0.0, 1.0, 2.0], np.float32)
    got = np.array([-nan, nan, -0.0, 0.0, 3.0, inf], np.float32)
    case = Case(id="lookup/t/0", family="lookup", operation="lookup_dequantize", inputs={},
                expected={"y": np.zeros(6, np.float32)})
    cls = value_classes(case, "y", exp.view(np.uint32), got.view(np.uint32))
    assert cls.tolist() == ["nan_sign_or_code", "nan_sign_or_code", "sign_of_zero", "sign_of_zero", "", ""]
    import ml_dtypes

    bf = Case(id="lookup/t/1", family="lookup", operation="lookup_dequantize", inputs={},
              expected={"y": np.zeros(3, ml_dtypes.bfloat16)})
    e, g = np.array([0x7FC0, 0x8000, 0x3F80], np.uint16), np.array([0x3F80, 0x0000, 0x4000], np.uint16)
    assert value_classes(bf, "y", e, g).tolist() == ["nan_sign_or_code", "sign_of_zero", ""]
    codes = Case(id="block/t/2", family="block", operation="block_quantize", inputs={},
                 expected={"codes": np.zeros(2, np.uint8)})  # codes (float8 ones too) are not read as values
    e8, g8 = np.array([0x7F, 0x00], np.uint8), np.array([0x00, 0x80], np.uint8)
    assert value_classes(codes, "codes", e8, g8).tolist() == ["", ""]

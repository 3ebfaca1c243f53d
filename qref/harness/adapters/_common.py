"""Helpers shared by the adapters: reading backend results as the case's arrays, and the source text of
reproducer scripts (standalone: numpy, ml_dtypes and the backend; inputs as literal bits)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from ...conformance.case import Case, to_storage
from ...formats import get_format
from ..families.uniform import element_params, scheme_of, to_scheme_of
from ..model import Unsupported

UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
K = TypeVar("K")


def codes_as(case: Case, name: str, raw: np.ndarray) -> np.ndarray:
    """A backend's result as the case's expected array ``name``: same shape; codes of a narrow format keep only
    the format's bits (a 4-bit code in a byte, an int8 read as uint8)."""
    exp = case.expected[name]
    a = np.ascontiguousarray(np.asarray(raw))
    if a.dtype.itemsize != exp.dtype.itemsize or a.size != exp.size:
        raise ValueError(f"backend returned {a.dtype}{list(a.shape)} for {name!r}, expected "
                         f"{exp.dtype}{list(exp.shape)}")
    a = a.reshape(exp.shape).view(UINT[exp.dtype.itemsize]).view(exp.dtype)
    fmt = case.array_formats.get(name)
    if fmt is not None:
        bits = get_format(fmt).bits
        if bits < 8 * exp.dtype.itemsize:
            a = a & exp.dtype.type((1 << bits) - 1)
    return a


def float_literal(a: np.ndarray, i: int) -> str:
    """Python source of a 1-element numpy array holding element i of ``a`` bit for bit."""
    flat = np.asarray(a).reshape(-1)
    x = flat[i : i + 1]
    name = "bfloat16" if x.dtype.name == "bfloat16" else x.dtype.name
    b = to_storage(x)
    w = b.dtype.itemsize
    u = f"np.uint{8 * w}"
    # an array of copies of one element (the runner's vectorized-path reproducer) is written as np.full
    copies = flat.size > 1 and bool((to_storage(flat) == b[0]).all())
    if x.dtype.kind in "iu" or x.dtype == np.bool_:
        return f"np.full({flat.size}, {int(x[0])}, np.{name})" if copies else f"np.array([{int(x[0])}], np.{name})"
    dt = f"ml_dtypes.{name}" if x.dtype.type.__module__.startswith("ml_dtypes") or name == "bfloat16" else f"np.{name}"
    if copies:
        return f"np.full({flat.size}, {hex(int(b[0]))}, {u}).view({dt})"
    return f"np.array([{hex(int(b[0]))}], {u}).view({dt})"


def first_literal(x: np.ndarray) -> str:
    """Python source of a 1-element array holding element 0 of ``x``: ``np.array([int(x[0])], np.<dtype name>)``
    for an integer dtype, else ``float_literal`` (its bits; an ml_dtypes type as ``ml_dtypes.<name>``: the script
    imports ml_dtypes, see ``literal_imports``)."""
    if x.dtype.kind in "iu":
        return f"np.array([{int(x.reshape(-1)[0])}], np.{x.dtype.name})"
    return float_literal(x, 0)


def literal_imports(base: str, *literals: str) -> str:
    """``base`` (an import line naming numpy) plus ``, ml_dtypes`` where a literal uses it."""
    return base + (", ml_dtypes" if any("ml_dtypes." in lit for lit in literals) else "")


def hex_print(expr: str, width: int) -> str:
    """Source printing the bits of element 0 of ``expr`` as hex (the form the report shows)."""
    return f"print(hex(int(np.asarray({expr}).reshape(-1).view(np.uint{8 * width})[0])))"


def python_c(*statements: str) -> str:
    """A standalone Python script of the statements, one a line (the runner appends the expected bits; the
    report shows it as a ``python`` block)."""
    return "\n".join(statements)


def row_snippet(head: str, case: Case, i: int, *statements: str) -> str:
    """The reproducer of element i of a weight-only matmul y = x W^T (M, N) in torch, N = the rows of the case's
    ``codes``: ``head``, the row m of x that holds the element as the tensor ``x``, the statements (which build W
    from the case's inputs and compute ``y`` from ``x``), and the print of element n of y's float32 bits
    (m, n = divmod(i, N))."""
    m, n = divmod(int(i), case.inputs["codes"].shape[0])
    return python_c(head, f"x = torch.from_numpy({array_literal(case.inputs['x'][m:m + 1])})", *statements,
                    f"print(hex(int(y.numpy().reshape(-1).view(np.uint32)[{n}])))")


def array_literal(a: np.ndarray) -> str:
    """Python source of ``a`` bit for bit (shape and dtype kept) from its bytes as a hex literal: numpy only, plus
    ml_dtypes for its types (the script imports it)."""
    a = np.ascontiguousarray(a)
    b = to_storage(a.reshape(-1))
    name = a.dtype.name
    dt = f"ml_dtypes.{name}" if a.dtype.type.__module__.startswith("ml_dtypes") or name == "bfloat16" \
        else f"np.{name}"
    if b.dtype == np.bool_:
        b = b.view(np.uint8)
    u = f"np.uint{8 * b.dtype.itemsize}" if b.dtype.kind in "ub" else f"np.{b.dtype.name}"
    src = f"np.frombuffer(bytes.fromhex('{b.astype(b.dtype.newbyteorder('<')).tobytes().hex()}'), {u})"
    if b.dtype != a.dtype:
        src += f".view({dt})"
    shape = tuple(int(n) for n in a.shape)
    return src if len(shape) == 1 else f"{src}.reshape({shape})"


def group_by(cases: Sequence[Case], key: Callable[[Case], K]) -> dict[K, list[int]]:
    """Indices of ``cases`` grouped by key (insertion order)."""
    out: dict[K, list[int]] = {}
    for i, c in enumerate(cases):
        out.setdefault(key(c), []).append(i)
    return out


def split(flat: np.ndarray, sizes: Iterable[int]) -> list[np.ndarray]:
    """Split a concatenated result back into per-case pieces."""
    out, start = [], 0
    for n in sizes:
        out.append(flat[start : start + n])
        start += n
    return out


def run_each(cases: Sequence[Case], fn: Callable[[Case], Any]) -> list[Any]:
    """Call fn per case, turning exceptions into results (the runner reports them)."""
    out: list[Any] = []
    for c in cases:
        try:
            out.append(fn(c))
        except Exception as exc:
            out.append(exc)
    return out


def per_case(fn: Callable[[Case], Any]) -> Callable[[Sequence[Case]], list[Any]]:
    """A target's ``run`` that calls ``fn`` on each case (``run_each``: an exception is that case's result)."""
    return lambda cases: run_each(cases, fn)


def element_signature(case: Case) -> tuple[str, str, str, str]:
    """(operation, format, input dtype, output dtype) of an element case: cases with equal signatures run as one
    concatenated batch."""
    name = "codes" if case.operation == "decode" else "x"
    (out,) = case.expected
    return (case.operation, case.format["name"], case.inputs[name].dtype.name, case.expected[out].dtype.name)


def run_elements(cases: Sequence[Case], fn: Callable[[tuple[str, str, str, str], np.ndarray], np.ndarray],
                 supported: Callable[[tuple[str, str, str, str]], str | None] | None = None) -> list[Any]:
    """Run element cases one by one: ``fn(signature, flat_input) -> flat_output`` on each case's own input (never
    a concatenation of cases: a vectorized kernel may treat an element differently depending on its position and
    the array length, and a case's result must depend on the case alone), read with ``codes_as``. Exceptions
    become the case's result."""
    out: list[Any] = []
    for c in cases:
        try:
            sig = element_signature(c)
            raise_unsupported(supported(sig) if supported is not None else None)
            src = "codes" if sig[0] == "decode" else "x"
            res = np.asarray(fn(sig, c.inputs[src].reshape(-1)))
            (name,) = c.expected
            out.append({name: codes_as(c, name, res.reshape(-1))})
        except Exception as exc:
            out.append(exc)
    return out


def run_element_groups(cases: Sequence[Case], prepare: Callable[[tuple[str, str, str, str]], Any],
                       call: Callable[[Any, tuple[str, str, str, str], np.ndarray], np.ndarray]) -> list[Any]:
    """Run element cases grouped by signature: ``prepare(signature)`` once per group (a compiled function, a
    session; what it raises is the result of every case of the group), then ``call(prepared, signature,
    flat_input)`` on each case's own input, read with ``codes_as``. Exceptions become the case's result."""
    out: list[Any] = [None] * len(cases)
    for sig, idxs in group_by(cases, element_signature).items():
        try:
            ready = prepare(sig)
        except Exception as exc:
            for i in idxs:
                out[i] = exc
            continue
        src = "codes" if sig[0] == "decode" else "x"
        for i in idxs:
            try:
                y = call(ready, sig, cases[i].inputs[src].reshape(-1))
                (oname,) = cases[i].expected
                out[i] = {oname: codes_as(cases[i], oname, y)}
            except Exception as exc:
                out[i] = exc
    return out


def raise_unsupported(reason: str | None) -> None:
    """Raise ``Unsupported(reason)`` where a target's ``supports`` check gave a reason (a run on a case the check
    refuses: the runner asks the check first, a direct call may not)."""
    if reason:
        raise Unsupported(reason)


def unsupported_reason(check: Callable[[Any], object]) -> Callable[[Any], str | None]:
    """A target's ``supports(case)``: None when check(case) runs, else the Unsupported message."""

    def supports(case: Any) -> str | None:
        try:
            check(case)
        except Unsupported as exc:
            return str(exc)
        return None

    return supports


def storage_values(case: Case) -> np.ndarray:
    """The codes input of a uniform_dequantize case as integer values of its storage type (sign-extended for
    signed storage narrower than the array), in the smallest numpy integer of >= 8 bits that holds them."""
    from ...formats import IntFormat

    (name,) = case.inputs
    c = np.asarray(case.inputs[name])
    st = get_format(case.scheme["storage"])
    if not isinstance(st, IntFormat):
        return c
    v = c.astype(np.int64) & ((1 << st.bits) - 1)
    if st.signed:
        v = np.where(v >= (1 << (st.bits - 1)), v - (1 << st.bits), v)
    width = 8 if st.bits <= 8 else (16 if st.bits <= 16 else (32 if st.bits <= 32 else 64))
    return v.astype(f"{'i' if st.signed else 'u'}{width // 8}")


def uniform_input(case: Case) -> np.ndarray:
    """The array a uniform case runs on: x of a uniform_quantize case (C-contiguous), else the codes as storage
    values (``storage_values``)."""
    if case.operation == "uniform_quantize":
        return np.ascontiguousarray(case.inputs["x"])
    return storage_values(case)


def single_element_case(case: Case, i: int) -> Case:
    """A copy of a uniform case reduced to element ``i`` of its input: per tensor with that element's scale and
    zero point (the minimal reproducer; the per-axis/blocked structure is not needed to show a per-element
    difference). A fake_quantize case (no scheme): x[i] with its four ranges, each of shape (1,)."""
    if case.operation == "fake_quantize":
        shape = case.inputs["x"].shape
        one = {n: np.broadcast_to(a, shape).reshape(-1)[i : i + 1] for n, a in case.inputs.items()}
        return Case(id=case.id, family=case.family, operation=case.operation, inputs=one,
                    expected={"y": case.expected["y"].reshape(-1)[i : i + 1]}, profile=case.profile,
                    params=dict(case.params), profiles=case.profiles)
    sch = scheme_of(case)
    s, z = element_params(case, i)
    spec = dict(sch.to_spec(), scales=[s], zero_points=[z], scale_shape=[], axis=None, block_size=None)
    (iname,) = case.inputs
    oname = "codes" if "codes" in case.expected else next(iter(case.expected))  # (a grad_mask follows the codes)
    one = {iname: case.inputs[iname].reshape(-1)[i : i + 1]}
    exp = {oname: case.expected[oname].reshape(-1)[i : i + 1]}
    params = dict(case.params)
    if case.operation == "uniform_requantize":  # the output type reduced to the element's own parameters
        to = to_scheme_of(case)
        shape = case.inputs[iname].shape
        S, Z = to.expand(shape)
        params["to"] = dict(to.to_spec(), scales=[float(np.broadcast_to(S, shape).reshape(-1)[i])],
                            zero_points=[int(np.broadcast_to(Z, shape).reshape(-1)[i])], scale_shape=[], axis=None,
                            block_size=None)
    return Case(id=case.id, family=case.family, operation=case.operation, inputs=one, expected=exp,
                scheme=spec, profile=case.profile, params=params, array_formats=dict(case.array_formats),
                profiles=case.profiles)


def _mask(case: Case) -> str:
    """Source text masking a printed storage value to its bit width (" & 0x3" for 2-bit codes), or ""."""
    from ...formats import IntFormat

    if case.operation not in ("uniform_quantize", "uniform_requantize"):
        return ""
    st = get_format((case.params["to"] if case.operation == "uniform_requantize" else case.scheme)["storage"])
    return f" & {hex((1 << st.bits) - 1)}" if isinstance(st, IntFormat) and st.bits < 8 else ""


def suite_input(case: Case, name: str = "x") -> str:
    """Source text of the case's input ``name`` as a literal (``array_literal``): the array the backend ran on, so
    for a reproducer the reduced case's (the row or blocks holding the element; ``case._slice`` says where they
    lie in the suite's case)."""
    return array_literal(case.inputs[name])


def to_torch(x: np.ndarray) -> Any:
    """x flattened into a torch tensor of the same dtype (bfloat16 through its bits)."""
    import torch

    flat = np.ascontiguousarray(x).reshape(-1)
    if flat.dtype.name == "bfloat16":
        return torch.from_numpy(flat.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(flat.copy())


def from_torch(t: Any) -> np.ndarray:
    """A torch tensor as numpy (bfloat16 as its uint16 bits)."""
    import torch

    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


#: jitted functions of this process by key (``jit_once``)
_JITS: dict[Hashable, Any] = {}


def jit_once(key: Hashable, make: Callable[[], Callable[..., Any]]) -> Any:
    """``jax.jit(make())``, made once per ``key`` in this process: cases whose function is the same program (the
    key names everything the function closes over) share one jitted function, so JAX's own cache (by argument
    shapes, dtypes, weak types and the x64 mode) traces and compiles it once per signature instead of once per
    case. The program, and so the executable XLA builds, is the same as a fresh ``jax.jit`` per case."""
    f = _JITS.get(key)
    if f is None:
        import jax

        f = _JITS[key] = jax.jit(make())
    return f


def jax_dot_modes(jax: Any, dot: Any, a: Any, b: Any, sa: Any, sb: Any, mode: str) -> np.ndarray:
    """dot(a, b, sa, sb) run as a JAX user writes it: "eager", "jit" (the scales as arguments) or
    "jit_constant_scales" (the scales closed over by jax.jit: compile-time constants XLA may fold, matmul.md §16)."""
    if mode == "eager":
        y = dot(a, b, sa, sb)
    elif mode == "jit":
        y = jax.jit(dot)(a, b, sa, sb)
    else:
        y = jax.jit(lambda qa, qb: dot(qa, qb, sa, sb))(a, b)
    return np.asarray(y)


__all__ = [
    "array_literal",
    "codes_as",
    "element_signature",
    "first_literal",
    "float_literal",
    "from_torch",
    "group_by",
    "hex_print",
    "jax_dot_modes",
    "jit_once",
    "literal_imports",
    "per_case",
    "python_c",
    "raise_unsupported",
    "row_snippet",
    "run_each",
    "run_element_groups",
    "run_elements",
    "single_element_case",
    "storage_values",
    "suite_input",
    "to_torch",
    "uniform_input",
    "unsupported_reason",
]

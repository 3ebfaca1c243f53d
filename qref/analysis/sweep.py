"""Exhaustive sweeps: every float32 (2^32) or 16-bit (2^16) input of a conversion, compared code by code with
another implementation (spec: performance.md).

``sweep(fmt, against="ml_dtypes")`` splits the input bit space into chunks, encodes each chunk with qref (fast path)
and with the other implementation, and counts mismatches by class. Chunks run in a process pool (both cores by
default) or on a Dask cluster (``dask_address``); memory stays bounded by the chunk size.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from ..core.encode import build_policy, encode_exact, encode_flat
from ..core.exact import decompose
from ..errors import QrefError, unknown_name
from ..formats import FloatFormat, Format, get_format

SOURCES = {"float32": (32, np.uint32, np.float32), "float16": (16, np.uint16, np.float16),
           "bfloat16": (16, np.uint16, ml_dtypes.bfloat16)}
AGAINST = ("ml_dtypes", "reference", "jax", "mlx", "torch")
CHUNK_BITS = 22  # 4 Mi inputs per task: ~20 MB of temporaries


@dataclass
class SweepResult:
    """Totals of one sweep; ``examples`` keeps the first mismatches of each class as (input bits, qref, other)."""

    format: str
    against: str
    source: str
    total: int = 0
    mismatches: int = 0
    by_class: Counter = field(default_factory=Counter)
    examples: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    seconds: float = 0.0

    def merge(self, part: dict[str, Any]) -> None:
        self.total += part["total"]
        self.mismatches += part["mismatches"]
        self.by_class.update(part["by_class"])
        for cls, ex in part["examples"].items():
            self.examples.setdefault(cls, [])
            self.examples[cls] = sorted(self.examples[cls] + ex)[:5]

    def summary(self) -> str:
        rate = self.total / self.seconds / 1e6 if self.seconds else 0.0
        lines = [f"{self.format} from {self.source} vs {self.against}: {self.total} inputs, {self.mismatches} "
                 f"mismatches, {self.seconds:.1f} s ({rate:.0f} M inputs/s)"]
        width = SOURCES[self.source][0] // 4
        for cls, n in self.by_class.most_common():
            lines.append(f"  {cls}: {n}")
            for bits, a, b in self.examples.get(cls, []):
                lines.append(f"    input 0x{bits:0{width}x}: qref 0x{a:x}, {self.against} 0x{b:x}")
        return "\n".join(lines)


def classify(fmt: Format, qref_codes: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Mismatch class names for differing code pairs (TestFloat-style): nan_code, nan_vs_value, sign_of_zero,
    saturation_vs_inf_nan, one_ulp (typically a tie rule), other."""
    a, b = qref_codes.astype(np.int64), other.astype(np.int64)
    out = np.full(a.shape, "other", dtype=object)
    if not isinstance(fmt, FloatFormat):
        out[np.abs(a - b) == 1] = "one_ulp"
        return out
    mm = fmt.magnitude_mask
    nan_a = np.array([fmt.is_nan_code(int(c)) for c in a], dtype=bool)
    nan_b = np.array([fmt.is_nan_code(int(c)) for c in b], dtype=bool)
    sign_a, sign_b = a & fmt.sign_mask, b & fmt.sign_mask
    mag_a, mag_b = a & mm, b & mm
    out[(np.abs(mag_a - mag_b) == 1) & (sign_a == sign_b)] = "one_ulp"
    out[(mag_a == 0) & (mag_b == 0) & (sign_a != sign_b)] = "sign_of_zero"
    out[nan_a != nan_b] = "nan_vs_value"
    out[nan_a & nan_b] = "nan_code"
    top = {fmt.max_finite_code} | ({fmt.inf_code} if fmt.has_inf else set())
    sat = np.array([(int(x) in top or na) and (int(y) in top or nb) and (x != y or na != nb)
                    for x, y, na, nb in zip(mag_a, mag_b, nan_a, nan_b)], dtype=bool)
    out[sat & (sign_a == sign_b) & ~(nan_a & nan_b)] = "saturation_vs_inf_nan"
    return out


def _other_codes(against: str, x: np.ndarray, fmt: Format, policy: Any) -> np.ndarray:
    if against == "reference":
        return encode_exact(decompose(x), fmt, policy.resolve(fmt)).astype(fmt.code_dtype)
    if against == "ml_dtypes":
        dt = np.dtype(np.float16) if fmt.name == "float16" else np.dtype(getattr(ml_dtypes, fmt.name, None) or "V")
        if dt.kind == "V" and dt.itemsize == 0:
            raise QrefError(f"ml_dtypes has no {fmt.name}; sweep it --against reference")
        with np.errstate(all="ignore"):
            y = x.astype(dt)
        return y.view(fmt.code_dtype)
    if against == "jax":
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_platforms", "cpu")
        y = np.asarray(jnp.asarray(x).astype(getattr(jnp, fmt.name)))
        return y.view(fmt.code_dtype)
    if against == "mlx":
        import mlx.core as mx

        if fmt.name != "float8_e4m3fn":
            raise QrefError("MLX converts to float8_e4m3fn only (mx.to_fp8)")
        return np.asarray(mx.to_fp8(mx.array(x)))
    if against == "torch":
        import torch

        dt = getattr(torch, fmt.name, None)
        if not isinstance(dt, torch.dtype) or fmt.bits != 8:
            raise QrefError(f"torch has no tensor.to() cast to {fmt.name}; sweep it --against ml_dtypes or reference")
        torch.set_num_threads(1)  # the sweep's processes already use every core
        t = torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16) \
            if x.dtype == ml_dtypes.bfloat16 else torch.from_numpy(np.ascontiguousarray(x))
        y = t.to(dt)  # tensor.to: the CPU kernel of the installed torch
        return y.view(torch.uint8).numpy()
    raise unknown_name("sweep backend", against, AGAINST)


def sweep_chunk(args: tuple[str, str, str, dict[str, Any], int, int]) -> dict[str, Any]:
    """Compare qref with ``against`` on input bit patterns [start, stop) of ``source`` (a picklable task)."""
    fmt_name, against, source, options, start, stop = args
    fmt = get_format(fmt_name)
    _, view, dtype = SOURCES[source]
    policy = build_policy(fmt=fmt, source_dtype=dtype, **options)
    bits = np.arange(start, stop, dtype=np.uint64).astype(view)
    x = bits.view(dtype)
    mine = encode_flat(x, fmt, policy.resolve(fmt))
    other = _other_codes(against, x, fmt, policy)
    bad = np.flatnonzero(mine != other)
    part: dict[str, Any] = {"total": int(bits.size), "mismatches": int(bad.size), "by_class": Counter(),
                            "examples": {}}
    if bad.size:
        classes = classify(fmt, mine[bad[:100000]], other[bad[:100000]])
        part["by_class"] = Counter(classes.tolist())
        if bad.size > 100000:
            part["by_class"]["unclassified (beyond 1e5 per chunk)"] = int(bad.size - 100000)
        for cls in set(classes.tolist()):
            idx = bad[:100000][classes == cls][:5]
            part["examples"][cls] = [(int(bits[i]), int(mine[i]), int(other[i])) for i in idx]
    return part


def _ranges(source: str, chunk_bits: int, limit: int | None) -> list[tuple[int, int]]:
    total = 1 << SOURCES[source][0] if limit is None else limit
    step = 1 << min(chunk_bits, SOURCES[source][0])
    return [(s, min(s + step, total)) for s in range(0, total, step)]


def progress_bar(total: int | None, desc: str, unit: str, enabled: bool, **kw: Any) -> Any:
    """A tqdm progress bar on stderr (the one progress library of qref's commands), or None when disabled or
    tqdm is not installed."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, **kw)


def sweep(
    fmt: str | Format,
    *,
    against: str = "ml_dtypes",
    source: str = "float32",
    workers: int | None = None,
    dask_address: str | None = None,
    progress: bool = False,
    limit: int | None = None,
    chunk_bits: int = CHUNK_BITS,
    **options: Any,
) -> SweepResult:
    """Sweep every ``source`` bit pattern (2^32 for float32) through ``fmt``; ``options`` are encode's policy
    options (rounding, overflow, nan, subnormals, profile...). ``limit`` sweeps only the first ``limit`` patterns."""
    job = {"fmt": fmt, "against": against, "source": source, **options}
    return sweep_many([job], workers=workers, dask_address=dask_address, progress=progress, limit=limit,
                      chunk_bits=chunk_bits)[0]


def sweep_many(
    jobs: Iterable[dict[str, Any]],
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    progress: bool = False,
    limit: int | None = None,
    chunk_bits: int = CHUNK_BITS,
) -> list[SweepResult]:
    """Several sweeps (formats x policies x backends: dicts of sweep()'s arguments) as one pool of tasks, so a
    Dask cluster or the local pool stays busy across the whole matrix."""
    results, tasks = [], []
    for j, job in enumerate(jobs):
        job = dict(job)
        f = get_format(job.pop("fmt"))
        against, source = job.pop("against", "ml_dtypes"), job.pop("source", "float32")
        if source not in SOURCES:
            raise unknown_name("sweep source dtype", source, SOURCES)
        if against not in AGAINST:
            raise unknown_name("sweep backend", against, AGAINST)
        build_policy(fmt=f, source_dtype=SOURCES[source][2], **job).resolve(f)  # validate before starting workers
        results.append(SweepResult(f.name, against, source))
        tasks += [(j, (f.name, against, source, job, a, b)) for a, b in _ranges(source, chunk_bits, limit)]
    total = sum(t[1][5] - t[1][4] for t in tasks)
    t0 = time.perf_counter()
    bar = progress_bar(total, "sweep", "input", progress, unit_scale=True, mininterval=1.0)
    try:
        for j, part in _run_tasks(tasks, workers, dask_address):
            results[j].merge(part)
            if bar is not None:
                bar.update(part["total"])
    finally:
        if bar is not None:
            bar.close()
    for r in results:
        r.seconds = time.perf_counter() - t0
    return results


def _indexed_chunk(task: tuple[int, tuple]) -> tuple[int, dict[str, Any]]:
    return task[0], sweep_chunk(task[1])


def _run_tasks(tasks: list[tuple], workers: int | None, dask_address: str | None
               ) -> Iterator[tuple[int, dict[str, Any]]]:
    if dask_address is not None:
        yield from _run_dask(tasks, dask_address)
        return
    n = workers or os.cpu_count() or 1
    if n == 1 or len(tasks) == 1:
        yield from map(_indexed_chunk, tasks)
        return
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no fork: safe with threads of jax/mlx and identical on every platform
    with ctx.Pool(n) as pool:
        yield from pool.imap_unordered(_indexed_chunk, tasks)


def _run_dask(tasks: Iterable[tuple], address: str) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        from dask.distributed import Client, as_completed
    except ImportError as exc:  # pragma: no cover - dask is an optional extra
        raise QrefError("--dask needs the optional extra: pip install 'qref[dask]'") from exc
    with Client(address) as client:
        futures = client.map(_indexed_chunk, list(tasks), pure=False)
        for fut in as_completed(futures):
            yield fut.result()


__all__ = ["AGAINST", "CHUNK_BITS", "SOURCES", "SweepResult", "classify", "progress_bar", "sweep", "sweep_chunk",
           "sweep_many"]

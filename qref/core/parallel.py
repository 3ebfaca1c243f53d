"""Chunks of large inputs on a thread pool (elements.md §2.11): numpy releases the GIL inside its kernels, so the
chunks of one call run on several cores. Results never depend on the thread count: every caller splits where
its results are independent (elements, whole blocks, rows of a per-axis scale) and each chunk computes exactly
what the whole would at those positions (stochastic random bits included: the same stream positions).

The thread count of a call is ``threads=`` where given, else the innermost ``thread_limit(n)`` in force, else
the environment variable ``QREF_NUM_THREADS``, else every core this process may run on. Inputs below
``THRESHOLD`` elements (measured, docs/performance.md §6) run on the calling thread; a chunk that calls
another threaded function runs it on its own thread (no nested pools).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import QrefError

ENV = "QREF_NUM_THREADS"
THRESHOLD = 1 << 18  # elements: below this one thread is as fast on the measured machine (performance.md §6)
MIN_CHUNK = THRESHOLD // 2  # elements per chunk at least: at the threshold, two chunks

_limit: contextvars.ContextVar[int | None] = contextvars.ContextVar("qref_threads", default=None)
_in_worker: contextvars.ContextVar[bool] = contextvars.ContextVar("qref_in_worker", default=False)
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _check(threads: object, what: str) -> int:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise QrefError(f"{what} must be a positive integer (1 = the calling thread only), got {threads!r}")
    return threads


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - platforms without sched_getaffinity
        return max(1, os.cpu_count() or 1)


def resolve_threads(threads: int | None = None) -> int:
    """threads, else thread_limit's, else $QREF_NUM_THREADS, else cores() (elements.md §2.11)."""
    if threads is not None:
        return _check(threads, "threads")
    lim = _limit.get()
    if lim is not None:
        return lim
    env = os.environ.get(ENV, "").strip()
    if env:
        try:
            return _check(int(env), f"${ENV}")
        except ValueError:
            raise QrefError(f"${ENV} must be a positive integer, got {env!r}") from None
    return cores()


@contextlib.contextmanager
def thread_limit(threads: int | None) -> Iterator[None]:
    """Threaded calls inside the block use ``threads`` threads (None: leave the setting as it is)."""
    if threads is None:
        yield
        return
    token = _limit.set(_check(threads, "threads"))
    try:
        yield
    finally:
        _limit.reset(token)


def chunk_bounds(units: int, unit_elements: int = 1, threads: int | None = None) -> list[tuple[int, int]]:
    """[lo, hi) ranges of ``units`` independent units (elements, blocks, rows) of ``unit_elements`` elements
    each: one range below THRESHOLD elements, on one thread or inside a pool worker; else one per thread, each
    of at least MIN_CHUNK elements, in order."""
    t = 1 if _in_worker.get() else resolve_threads(threads)
    total = units * max(1, unit_elements)
    if t <= 1 or total < THRESHOLD or units < 2:
        return [(0, units)]
    k = max(1, min(t, units, total // MIN_CHUNK))
    edges = [units * i // k for i in range(k + 1)]
    return [(edges[i], edges[i + 1]) for i in range(k) if edges[i + 1] > edges[i]]


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < n:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _pool_size = ThreadPoolExecutor(max_workers=n, thread_name_prefix="qref"), n
        return _pool


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's pool threads: it starts a pool of its own when it needs one."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _as_worker(work: Callable[[int, int], None], lo: int, hi: int) -> None:
    _in_worker.set(True)  # inside this chunk's copied context only
    work(lo, hi)


def run_chunks(work: Callable[[int, int], None], units: int, unit_elements: int = 1,
               threads: int | None = None) -> None:
    """work(lo, hi) over ``chunk_bounds(units, unit_elements, threads)``: on the calling thread for one range,
    else on the pool, each chunk in a copy of the caller's context (numpy's error state and buffer size, the
    thread limit). work must write only its own [lo, hi) of the outputs. The first exception is raised."""
    bounds = chunk_bounds(units, unit_elements, threads)
    if len(bounds) == 1:
        work(0, units)
        return
    pool = _executor(len(bounds))
    futures = [pool.submit(contextvars.copy_context().run, _as_worker, work, lo, hi) for lo, hi in bounds]
    err: BaseException | None = None
    for f in futures:  # wait for every chunk (outputs are written in place), then raise the first error
        try:
            f.result()
        except BaseException as exc:  # re-raised below, in chunk order
            err = err or exc
    if err is not None:
        raise err


SCRATCH_MAX = 1 << 23  # bytes: a scratch request above this gets a fresh array (nothing that large is kept)
_scratch = threading.local()


def scratch(site: str, n: int, dtype: object) -> np.ndarray:
    """An uninitialised 1-D buffer of ``n`` elements of ``dtype``, kept for the calling thread and ``site`` (a
    name unique to the caller) and handed out again on its next call (performance.md §6.3.2): a fresh
    temporary of a few MB costs its page faults (the kernel zeroes every page) on every call, a kept one once
    per thread. Valid until the same thread asks for ``site`` again: never return it, or a view of it, to a
    caller. Each thread keeps at most one buffer per site, of at most SCRATCH_MAX bytes."""
    dt = np.dtype(dtype)
    nbytes = n * dt.itemsize
    if nbytes > SCRATCH_MAX:
        return np.empty(n, dtype=dt)
    bufs: dict[str, np.ndarray] = _scratch.__dict__.setdefault("bufs", {})
    buf = bufs.get(site)
    if buf is None or buf.nbytes < nbytes:
        buf = bufs[site] = np.empty(nbytes, dtype=np.uint8)
    return buf[:nbytes].view(dt)


PIECE = 1 << 18  # elements per piece of a chunk: bounds a kernel's temporaries (memory, performance.md §6)


def pieces(lo: int, hi: int, unit_elements: int = 1, piece: int = PIECE) -> Iterator[tuple[int, int]]:
    """[a, b) sub-ranges of units [lo, hi), each of at most ``piece`` elements (at least one unit); an empty
    range is one empty piece (so an empty input still reaches the kernel and gets its empty outputs)."""
    step = max(1, piece // max(1, unit_elements))
    if hi <= lo:
        yield lo, lo
        return
    for a in range(lo, hi, step):
        yield a, min(hi, a + step)


__all__ = ["ENV", "MIN_CHUNK", "PIECE", "THRESHOLD", "chunk_bounds", "cores", "pieces", "resolve_threads",
           "run_chunks", "scratch", "thread_limit"]

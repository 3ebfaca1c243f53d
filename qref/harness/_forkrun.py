"""Run reproducer scripts in forked children of one process that has already imported their backend.

    python _forkrun.py MODULE[,MODULE...] JOBS TIMEOUT RESULTS.json SCRIPT.py...

This file is run as a program, never imported by qref: it uses the standard library only, so the process that
forks the scripts holds numpy and the MODULEs and nothing of qref. Each script runs as ``python -c RUN script.py``
would (reproducer.capture): in its own process (a fork of this one, taken before any backend computation has run),
from the script's directory, with ``sys.modules['qref'] = None``, in a fresh ``__main__`` namespace, so a name the
script does not import is still a NameError. Only the imports of numpy and the MODULEs are shared, which saves the
backend's import (one to five seconds) per script. The environment is this process's: a script that sets
environment variables before its imports is run here only when the caller started this process with the same
variables already set (reproducer.capture does), so the backend is imported under the environment the script gives
it. RESULTS.json receives ``[[exit status, stdout, stderr], ...]`` in the order of the scripts; a script still
running after TIMEOUT seconds is killed (exit status -9, stderr says so).
"""

from __future__ import annotations

import atexit
import builtins
import importlib
import json
import os
import signal
import sys
import tempfile
import time
import traceback


def _child(path: str, out: str, err: str) -> None:
    """In the forked child: stdout / stderr to files, run the script, exit with its status."""
    fo, fe = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fo, 1)
    os.dup2(fe, 2)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    os.chdir(os.path.dirname(path))
    sys.path.insert(0, "")  # as ``python -c``: the current directory first
    sys.argv = [path]
    sys.modules["qref"] = None  # type: ignore[assignment]
    code = 0
    try:
        with open(path, encoding="utf-8") as f:
            src = f.read()
        exec(compile(src, path, "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: list[str]) -> None:
    modules, jobs, timeout, results, scripts = argv[0], int(argv[1]), float(argv[2]), argv[3], argv[4:]
    importlib.import_module("numpy")
    for module in modules.split(","):
        importlib.import_module(module)
    tmp = tempfile.mkdtemp(prefix="qref_forkrun_")
    running: dict[int, tuple[int, float]] = {}
    status: dict[int, int] = {}
    queue = list(range(len(scripts)))
    while queue or running:
        while queue and len(running) < jobs:
            k = queue.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(scripts[k], f"{tmp}/{k}.out", f"{tmp}/{k}.err")
            running[pid] = (k, time.monotonic())
        done = False
        for pid in list(running):  # our children only (a backend's import may have started processes of its own)
            k, t0 = running[pid]
            got, st = os.waitpid(pid, os.WNOHANG)
            if got:
                status[k] = os.waitstatus_to_exitcode(st)
                del running[pid]
                done = True
            elif time.monotonic() - t0 > timeout:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                with open(f"{tmp}/{k}.err", "a", encoding="utf-8") as fe:
                    fe.write(f"\nno result after {timeout:.0f} s\n")
                status[k] = -9
                del running[pid]
                done = True
        if not done:
            time.sleep(0.01)
    res = []
    for k in range(len(scripts)):
        with open(f"{tmp}/{k}.out", encoding="utf-8", errors="replace") as fo, \
                open(f"{tmp}/{k}.err", encoding="utf-8", errors="replace") as fe:
            res.append([status[k], fo.read(), fe.read()])
        os.remove(f"{tmp}/{k}.out")
        os.remove(f"{tmp}/{k}.err")
    os.rmdir(tmp)
    with open(results, "w", encoding="utf-8") as f:
        json.dump(res, f)


__all__ = ["main"]


if __name__ == "__main__":
    sys.path.pop(0)  # this file's directory (qref/harness) is not the scripts' to import from
    main(sys.argv[1:])

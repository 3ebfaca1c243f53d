"""Run reproducer scripts in forked children of one process that has already imported their backend.

    python repro_forkserver.py MODULE JOBS SCRIPT...   (prints one JSON line: [[returncode, stdout, stderr], ...])

Each script runs as ``python -c RUN script`` would (tests/test_reproducers.py): in its own process (a fork of this
one, taken before any backend computation has run), from the script's directory, with ``sys.modules['qref'] =
None``, in a fresh ``__main__`` namespace (so a name the script does not import is still a NameError); only the
import of MODULE (and numpy) is shared, which saves a second or two per script. Scripts that set environment
variables a backend reads are not sent here (the test runs them in fresh processes).
"""

from __future__ import annotations

import atexit
import builtins
import importlib
import json
import os
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
    sys.argv = [path]
    sys.modules["qref"] = None  # type: ignore[assignment]
    code = 0
    try:
        src = open(path, encoding="utf-8").read()  # noqa: SIM115
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
    module, jobs, scripts = argv[0], int(argv[1]), argv[2:]
    importlib.import_module("numpy")
    importlib.import_module(module)
    tmp = tempfile.mkdtemp(prefix="repro_fork_")
    running: dict[int, int] = {}
    status: dict[int, int] = {}
    queue = list(range(len(scripts)))
    while queue or running:
        while queue and len(running) < jobs:
            k = queue.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(scripts[k], f"{tmp}/{k}.out", f"{tmp}/{k}.err")
            running[pid] = k
        done = False
        for pid in list(running):  # our children only (a backend's import may have started processes of its own)
            got, st = os.waitpid(pid, os.WNOHANG)
            if got:
                status[running.pop(pid)] = os.waitstatus_to_exitcode(st)
                done = True
        if not done:
            time.sleep(0.02)
    res = []
    for k in range(len(scripts)):
        with open(f"{tmp}/{k}.out", encoding="utf-8", errors="replace") as fo, \
                open(f"{tmp}/{k}.err", encoding="utf-8", errors="replace") as fe:
            res.append([status[k], fo.read(), fe.read()])
    sys.stdout.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])

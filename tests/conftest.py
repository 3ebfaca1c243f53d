import importlib.util
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the independent oracle lives next to the tests


@pytest.hookimpl(trylast=True)  # after -k / -m / --deselect: only what will run counts
def pytest_collection_modifyitems(config, items):
    """Tests marked slow first (in their collected order), then the rest: with several xdist workers the long
    tests start early and the short ones fill the gaps, instead of one long test starting last on one worker."""
    items[:] = [i for i in items if i.get_closest_marker("slow")] + [i for i in items
                                                                     if not i.get_closest_marker("slow")]
    _share_reproducer_runs(items)


HARNESS_TEST = "test_harness_report.py::test_committed_report_and_findings_are_current"
REPRO_TEST = "test_reproducers.py::test_every_reproducer_runs_without_qref_and_prints_the_documented_bits"


def _share_reproducer_runs(items):
    """The full-harness test regenerates every findings page and compares it byte for byte with the committed
    one, capturing each "Prints:" line by running its script as test_reproducers runs it (reproducer.run_scripts,
    the same forks); every reproducer of the committed docs is on those pages. Where that test is collected in
    this session and every backend is installed (so it runs), the per-backend reproducer runs would repeat the
    same runs: they are skipped, saying so. Run alone, or with a backend missing, they run (QREF_REPRO_ALL=1:
    always)."""
    if os.environ.get("QREF_REPRO_ALL") == "1" or not any(i.nodeid.endswith(HARNESS_TEST) for i in items):
        return
    from qref.harness.reproducer import PRELOAD

    def installed(mod: str) -> bool:
        try:
            return importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            return False

    if not all(installed(m.split(",")[0].split(".")[0]) for m in PRELOAD.values()):  # top-level: no import
        return
    why = pytest.mark.skip(reason="covered in this session by tests/test_harness_report.py, which runs every one "
                                  "of these scripts the same way and compares the captured lines with the "
                                  "committed pages (QREF_REPRO_ALL=1 runs them here too)")
    for i in items:
        if REPRO_TEST in i.nodeid:
            i.add_marker(why)

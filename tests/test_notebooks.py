"""Execute every notebook in docs/notebooks top to bottom on a fresh kernel (nbclient) and fail on any error.

The kernel is pinned to the interpreter running the tests (a temporary kernelspec whose argv is sys.executable),
so a "python3" kernel from another environment can never be picked up. Notebooks are committed without outputs;
CI executes them here. A warning raised in qref or in a notebook cell fails the test too.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="notebook tests need nbformat (optional extra 'notebooks')")
nbclient = pytest.importorskip("nbclient", reason="notebook tests need nbclient (optional extra 'notebooks')")
pytest.importorskip("ipykernel", reason="notebook tests need ipykernel (optional extra 'notebooks')")
pytest.importorskip("matplotlib", reason="the notebooks plot with matplotlib (optional extra 'notebooks')")

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "docs" / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))
KERNEL = "qref-pytest"
# notebooks that must draw at least this many figures
MIN_FIGURES = {"01_format_tour": 6, "02_llm_tensors": 5, "03_mx_scale_rules": 4, "04_conformance_explorer": 0,
               "05_mma_error": 3, "06_training_recipes": 4}


def test_notebooks_exist_and_are_committed_without_outputs() -> None:
    assert [p.stem for p in NOTEBOOKS] == sorted(MIN_FIGURES)
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: clear the outputs"


def test_readme_figure_is_committed() -> None:
    png = ROOT / "docs" / "img" / "llm_sqnr.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A kernelspec running this interpreter, found first on JUPYTER_PATH for the duration of the module."""
    d = tmp_path_factory.mktemp("jupyter")
    spec = d / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "qref (pytest)", "language": "python",
        "env": {"PYTHONWARNINGS": "default", "MPLBACKEND": "module://matplotlib_inline.backend_inline"},
    }))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(d) + os.pathsep + os.environ.get("JUPYTER_PATH", ""))
        mp.setenv("JUPYTER_PLATFORM_DIRS", "1")
        yield KERNEL


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path: Path, kernel_name: str) -> None:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name=kernel_name, timeout=600, allow_errors=False,
                                     resources={"metadata": {"path": str(NB_DIR)}})
    t0 = time.perf_counter()
    client.execute()  # raises CellExecutionError with the traceback of the first failing cell
    seconds = time.perf_counter() - t0
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # warnings raised by qref or by the notebook's own cells (third-party internals are not ours to fix)
    stderr = "".join(o.text for o in outputs if o.output_type == "stream" and o.name == "stderr")
    warned = [ln for ln in stderr.splitlines() if "Warning" in ln and ("qref" in ln or "ipykernel_" in ln)]
    assert not warned, f"{path.name} printed warnings: {warned[:3]}"
    figures = sum("image/png" in o.get("data", {}) for o in outputs)
    assert figures >= MIN_FIGURES[path.stem], f"{path.name}: {figures} figures"
    print(f"{path.name}: {seconds:.1f} s, {figures} figures")

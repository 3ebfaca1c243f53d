"""Backend conformance harness: run the golden suite on real backends and report what conforms
(docs/conformance.md).

    from qref.harness import run, render
    res = run(["ml_dtypes", "onnxruntime"])          # or "all"; suite=..., include=[...], xfail_files=[...]
    print(render(res))                               # the markdown report; res.to_json() for results.json
    res.ok                                           # no unexpected failure, no stale xfail entry
    res = check(my_encode, family="elements", policy={"overflow": "saturate"})   # your own implementation

Adapters (qref/harness/adapters/<backend>.py) call the real libraries; family modules
(qref/harness/families/<family>.py) hold the expectations (qref's spec default and named profiles).
"""

from .adapters import BACKENDS, load_targets
from .classify import CLASSES
from .model import BackendMissing, Target, TaskResult, Unsupported
from .report import render, write_report, write_results
from .runner import RunResults, run
from .user import callable_target, check

__all__ = ["BACKENDS", "CLASSES", "BackendMissing", "RunResults", "Target", "TaskResult", "Unsupported",
           "callable_target", "check", "load_targets", "render", "run", "write_report", "write_results"]

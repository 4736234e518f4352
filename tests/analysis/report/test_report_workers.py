"""The report's independent fits in worker processes (analysis/fitting/workers.py): the same
report, byte for byte, from one worker and from two, and the units really leave the process."""
import os
import sys
import time
import types

import pytest

from depthdelusion.analysis import laws
from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.fitting.workers import PARALLEL_FROM_BOOTSTRAPS, Workers, available_cpus
from depthdelusion.analysis.report.build import build_report
from depthdelusion.analysis.report.options import ReportOptions
from depthdelusion.analysis.report.results import worker_count

from .test_report_design import two_budget_runs


def test_units_run_in_spawned_processes_and_come_back_in_order():
    with Workers(2) as workers:
        pids = workers.map(_pid_and_square, [1, 2, 3, 4])
    assert [square for _, square in pids] == [1, 4, 9, 16]
    assert os.getpid() not in {pid for pid, _ in pids}
    with Workers(1) as workers:
        assert {pid for pid, _ in workers.map(_pid_and_square, [1, 2])} == {os.getpid()}


def test_by_default_a_report_with_bootstraps_uses_the_cpus_and_a_quick_one_stays_here():
    def count(bootstrap, workers=None, fitted=("depth_delusion", "kaplan")):
        return worker_count(ReportOptions(fit=FitOptions(bootstrap=bootstrap), workers=workers), fitted)

    assert count(PARALLEL_FROM_BOOTSTRAPS) == count(1000) == available_cpus()
    assert count(PARALLEL_FROM_BOOTSTRAPS - 1) == count(0) == 1
    assert count(0, workers=3) == 3 and count(1000, workers=1) == 1
    assert ReportOptions().workers == 1  # from Python: one process unless asked (spawn wants a guarded script)
    # a law a fresh process would not fit as this one does keeps every unit here
    assert count(1000, workers=3, fitted=("depth_delusion", "size_kink")) == 1  # its roles hold a lambda
    original = laws.get_law("kaplan")
    laws.register_law(original.func, params={p.name: p for p in original.params}, name="kaplan", replace=True)
    try:
        assert count(1000, workers=3) == 1  # kaplan replaced here: a worker would fit the built-in one
    finally:
        laws._REGISTRY["kaplan"] = original
    assert count(1000, workers=3) == 3



def test_options_a_worker_could_not_load_keep_every_unit_here(monkeypatch):
    def count(fit):
        return worker_count(ReportOptions(fit=fit, workers=3), ("depth_delusion",))

    class OwnOptions(FitOptions):  # defined in a function: it does not pickle
        pass

    assert count(OwnOptions(bootstrap=1000)) == 1
    # a notebook's class pickles by name, but a spawned process has no such __main__ to find it in
    notebook = types.ModuleType("__main__")
    notebook.NotebookOptions = type("NotebookOptions", (FitOptions,), {"__module__": "__main__"})
    monkeypatch.setitem(sys.modules, "__main__", notebook)
    assert count(notebook.NotebookOptions(bootstrap=1000)) == 1
    notebook.__file__ = "analyse.py"  # a script's __main__ is re-run in the worker, under its guard
    assert count(notebook.NotebookOptions(bootstrap=1000)) == 3


def test_a_failing_unit_stops_the_others_at_once():
    start = time.perf_counter()
    with pytest.raises(ValueError, match="unit 0"):
        with Workers(2) as workers:
            workers.map(_fail_or_sleep, [0, 1])
    assert time.perf_counter() - start < 30  # the sleeping unit (60 s) was stopped, not waited for


def _fail_or_sleep(x):
    if x == 0:
        raise ValueError("unit 0")
    time.sleep(60)


def _pid_and_square(x):
    return os.getpid(), x * x


def test_a_report_is_the_same_from_one_worker_and_from_two():
    """Every stage that hands out units (the laws' fits with their bootstraps and profiles, the
    tests' refits, the design forms and their rechecked cells) gives the same report: a unit's
    numbers depend on its inputs only, and every fit comes back whole from a worker."""
    runs = two_budget_runs(penalty=0.05, widths=(128, 256, 512), depths=(2, 6, 12, 24))
    fit = FitOptions(bootstrap=4, leave_one_out=False)  # profiles kept: a fit with them must pickle
    texts = []
    for workers in (1, 2):
        options = ReportOptions(fit=fit, laws=("depth_delusion", "shape_quadratic", "kaplan"), lr_replicates=4,
                                runs_label="synthetic", workers=workers)
        report, md, tex = build_report(runs, options)
        texts.append((md, tex))
    assert report.results.design.matrix and report.results.calibrated  # the design stages handed out units
    assert texts[0] == texts[1]

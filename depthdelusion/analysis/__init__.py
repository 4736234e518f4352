"""JAX-free analysis of depth x width scaling runs: the runs table, the law registry, fitting
(Levenberg–Marquardt / Huber with bootstrap), persistence length, optimal shape, audits, reports.

    from depthdelusion.analysis import load_reference, fit
    r = fit(load_reference("depth_delusion"), "depth_delusion")
    print(r.summary())

    from depthdelusion.analysis import shape_answer
    a = shape_answer({"gemstones": load_table("gemstones")}, compute=[1e21])  # D*, W*, band

Any table works with the columns its law needs (``load_runs("runs.csv", columns={"params": "N"})``;
names and aliases in :mod:`.table.columns`).
"""
from .laws import Law, LawInputs, Param, Roles, get_law, list_laws, register_law
from .table.law_columns import law_columns, law_missing_columns, laws_for
from .table.published import load_table
from .table.load import load_reference, load_runs
from .table.runs import GradientProfile, Runs

__all__ = ["FitResult", "GradientProfile", "Law", "LawInputs", "Param", "Roles", "Runs", "fit", "get_law",
           "law_columns", "law_missing_columns", "laws_for", "list_laws", "load_reference",
           "load_runs", "load_table", "register_law", "shape_answer"]


def __getattr__(name):
    # fit and FitResult import scipy (about a second): only when used, so that the CLI's help
    # and the table-only commands start fast.
    if name in ("fit", "FitResult"):
        from .fitting import engine

        return getattr(engine, name)
    if name == "shape_answer":  # how deep, how wide for C FLOPs (issue 58); scipy too
        from .fitting.shape_answer import shape_answer

        return shape_answer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

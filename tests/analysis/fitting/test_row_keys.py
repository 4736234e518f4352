"""Rows are rows: every per-row output of a fit (outlier lines, the most influential row,
``--json``'s per-row maps and outliers, ``--drop-outliers``) names a row by its label and its
row number, so that a shape's checkpoints at several token budgets — one label, several rows —
neither collapse into one entry nor lend each other their numbers (issue 63, item 1)."""
import json
import re

import numpy as np

from depthdelusion.analysis import Runs, fit
from depthdelusion.analysis.fitting.outlier_rows import without_outliers

BARE = dict(bootstrap=0, profile=False, leave_one_out=False)
BUDGETS = (2e9, 8e9, 3.2e10)  # three checkpoints of every shape: its label repeats
BAD = 13  # row 14 (1-based): one checkpoint pushed down, the shape's other rows left alone


def shapes_at_budgets(seed=0):
    """Chinchilla-like losses of 8 shapes × 3 token budgets, named "{D}Lx{W}" (the default name
    of a shaped table), row ``BAD`` 0.3 nats below the law."""
    rng = np.random.default_rng(seed)
    shapes = [(d, w) for d, w in ((4, 256), (6, 384), (8, 512), (10, 640), (12, 768), (16, 1024),
                                  (20, 1280), (24, 1536))]
    depth = np.repeat([d for d, _ in shapes], len(BUDGETS))
    width = np.repeat([w for _, w in shapes], len(BUDGETS))
    tokens = np.tile(BUDGETS, len(shapes))
    params = 12.0 * depth * width.astype(float) ** 2
    loss = 1.8 + 480 * params ** -0.35 + 2000 * tokens ** -0.37 + 0.005 * rng.standard_normal(len(depth))
    loss[BAD] -= 0.3
    return Runs(depth=depth, width=width, params=params, tokens=tokens, loss=loss)


def test_the_outlier_line_quotes_the_flagged_rows_own_z_under_its_row_number():
    runs = shapes_at_budgets()
    label = runs.name[BAD]
    assert list(runs.name).count(label) == 3  # the premise: its label is shared
    r = fit(runs, "chinchilla", **BARE, diagnostics=True)
    d = r.diagnostics
    same_label = [i for i in range(len(runs)) if runs.name[i] == label and i != BAD]
    assert all(abs(d.robust_z[i] - d.robust_z[BAD]) > 3 for i in same_label)
    line = next(x for x in r.summary().splitlines() if x.startswith("Outlying rows"))
    quoted = [float(z) for z in re.findall(r"z = ([+-]\d+\.\d)\)", line)]
    assert quoted == [round(float(d.robust_z[BAD]), 1)]  # its own z, not a same-label row's
    assert f"{label} (row {BAD + 1}, z = {d.robust_z[BAD]:+.1f})" in line
    assert d.outlier_rows == [BAD] and d.outliers == [f"{label} (row {BAD + 1})"]


def test_json_keeps_every_row_of_a_repeated_label():
    runs = shapes_at_budgets()
    r = fit(runs, "chinchilla", **BARE, diagnostics=True)
    doc = json.loads(r.to_json())
    assert len(doc["residuals"]) == len(runs) == 24  # not 8 labels, last write winning
    for key in ("robust_z", "leverage", "cooks_distance"):
        assert len(doc["diagnostics"][key]) == len(runs)
    label = runs.name[BAD]
    key = f"{label} (row {BAD + 1})"
    assert doc["outliers"] == [key]
    assert doc["residuals"][key] == r.residuals[BAD]
    assert doc["diagnostics"]["robust_z"][key] == r.diagnostics.robust_z[BAD]
    assert list(doc["residuals"]) == [f"{nm} (row {i + 1})" for i, nm in enumerate(runs.name)]
    assert r.to_json() == json.dumps(doc, indent=2)  # the streamed text is the same document


def test_drop_outliers_names_the_row_it_drops_and_keeps_the_labels_other_rows():
    runs = shapes_at_budgets()
    label = runs.name[BAD]
    kept = without_outliers(runs, "chinchilla")
    assert kept.selection["dropped"] == [f"{label} (row {BAD + 1})"]
    assert len(kept) == len(runs) - 1 and list(kept.name).count(label) == 2

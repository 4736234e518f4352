"""The public-shapes study on Chinchilla's own runs (issue 58 item 3): the table
``chinchilla_shapes`` (Hoffmann et al.'s runs, Epoch's digitised points, each with its width and
depth from Table A9) under each N convention, with the statistics the study gives Gemstones:

- where the runs sit against the paper's D_crit = κ·ln W (how many shapes and runs lie past it);
- the paper's audit: each shape's excess loss over the chinchilla fit against D / D_crit, the
  deep shapes minus the rest with a bootstrap over shapes (:func:`.answers.audit`);
- the kink nested in the best smooth law (gemstones_width_depth), and λ = 0 with the kink nested
  in chinchilla, both calibrated by resampling whole shapes' residual series, the first with its
  power against the paper's kink (:mod:`.nested`).

A shape is the resampling unit: Chinchilla's rows are separate training runs, but the runs of one
shape share its architecture, so a shape effect is a property of the shape, not of a row.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.analysis.reference import PAPER_KAPPA
from depthdelusion.studies.public_shapes import nested
from depthdelusion.studies.public_shapes.answers import AuditContrast, audit
from depthdelusion.studies.public_shapes.study import Arm, convention_runs, fit_laws, shape_labels

TABLE = "chinchilla_shapes"
#: the null laws of the two nested tests: the kink inside the smooth law, and inside chinchilla
NULLS = (nested.SMOOTH, nested.Model(shape=False))


@dataclass(frozen=True)
class ChinchillaShapes:
    """One N convention on chinchilla_shapes: where the runs sit, the audit, the nested tests."""

    arm: Arm
    shapes_past: int          # shapes with D > the paper's D_crit
    rows_past: int            # runs (rows) of those shapes
    contrast: AuditContrast
    tests: tuple              # nested.NestedKink per NULLS entry


def measure(conventions, *, bootstrap: int, replicates: int, seed: int, start=(0.3, 0.5, 0.3, 0.3)) -> tuple:
    """:class:`ChinchillaShapes` per convention (ε fitted on this table for "fitted")."""
    out = []
    for convention in conventions:
        runs, epsilon, weight = convention_runs(TABLE, convention)
        clusters = shape_labels(runs)
        arm = Arm(TABLE, convention, runs, clusters, fit_laws(runs, clusters, ["chinchilla"], bootstrap=0, seed=seed),
                  epsilon=epsilon, weight=weight)
        rows, diff, ci = audit(arm, bootstrap=bootstrap, seed=seed)
        past = [r for r in rows if r.ratio > 1]
        tests = tuple(nested.nested_test(arm, replicates=replicates, seed=seed, start=start, model=m,
                                         power_draws=nested.power_draws(replicates) if m.shape else 0)
                      for m in NULLS) if replicates else ()
        out.append(ChinchillaShapes(arm, len(past), int(sum(np.sum(clusters == r.shape) for r in past)),
                                    AuditContrast(arm.label, TABLE, convention, tuple(rows), diff, ci), tests))
    return tuple(out)


def rows(found) -> list[dict]:
    """chinchilla_shapes.csv: per convention and null law the nested test, with where the runs
    sit and the audit contrast."""
    out = []
    for c in found:
        base = {"n_convention": c.arm.convention, "epsilon": round(c.arm.epsilon, 3), "runs": len(c.arm.runs),
                "shapes": c.arm.n_shapes, "shapes_past_d_crit": c.shapes_past, "runs_past_d_crit": c.rows_past,
                "deep_minus_rest": round(c.contrast.diff, 4), "deep_minus_rest_ci95_low": round(c.contrast.ci[0], 4),
                "deep_minus_rest_ci95_high": round(c.contrast.ci[1], 4)}
        out += [{**base, **r} for r in nested.rows(c.tests)] or [base]
    return out


def section(found) -> list[str]:
    """The report's section on chinchilla_shapes."""
    if not found:
        return []
    first = found[0]
    lines = ["## Chinchilla's own runs: the kink on the runs the Chinchilla law came from (chinchilla_shapes.csv)", "",
             f"`{TABLE}`: {len(first.arm.runs)} runs of {first.arm.n_shapes} shapes (Epoch's 5 highest losses "
             "left out, as for epoch_chinchilla; losses read from figure colours, steps of ≈ 0.011 nats). "
             f"{first.shapes_past} of the {first.arm.n_shapes} shapes ({first.rows_past} runs) are deeper than the "
             f"paper's D_crit = {PAPER_KAPPA}·ln W. The statistics are Gemstones': the audit (excess over "
             "chinchilla, deep shapes minus the rest, 95% bootstrap over shapes), the kink nested in the smooth "
             "law with its power, and λ = 0 with the kink nested in chinchilla; both tests resample whole shapes' "
             "residual series (a shape is the unit: its runs share the architecture). N: Table A9's count, one "
             "V × W matrix (tied or not is not stated); Kaplan's N removes it.", ""]
    table = []
    for c in found:
        for k in c.tests:
            power = "; ".join(f"{s:g}×: {pw:.2f} ({pen:.3f})" for s, pen, pw in k.power) or "–"
            table.append([c.arm.convention, f"{c.arm.epsilon:.3g}", c.contrast.text() + f" ({c.contrast.sign})",
                          k.null, f"{k.lr:.2f}", f"{k.p:.3f}", f"λ {k.kink[0]:.3g}, κ {k.kink[1]:g}, γ {k.kink[2]:.2f}",
                          power])
    lines += [markdown_table(["N", "ε", "audit: deep − rest", "kink nested in", "LR", "p", "kink fitted",
                              f"power (penalty at {found[0].tests[0].worst_shape if found[0].tests else '–'})"],
                             table, "lrllrrll"), ""] if table else []
    for c in found:
        for k in c.tests:
            lines.append(f"- {c.arm.label}, kink in {k.null}: λ = 0 " + ("rejected" if k.rejects else "not rejected")
                         + f" (p = {k.p:.3f}, {k.replicates} draws)" + (f"; {k.excluded()}" if k.power else "") + ".")
    return lines + [""]

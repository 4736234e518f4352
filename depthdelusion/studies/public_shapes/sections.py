"""The public-shapes report's sections for the compute-optimal shape (4.2), the prediction test
(item 5) and the figures (item 6); the check on Gadre et al. (item 2) is :mod:`.gadre`'s."""
from __future__ import annotations

import numpy as np

from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.analysis.reference import PAPER_SHAPE_EXPONENTS
from depthdelusion.studies.public_shapes.prediction import (BASELINE, HELD_OUT, LAST_BUDGETS, LATER_HARDEST,
                                                         LATER_TABLE, SMALL, SWAP_DRAWS,
                                                         SWAP_LEVEL, SWAPS_EXACT_TO)


def _ci(lo, hi) -> str:
    return "" if lo is None or not np.isfinite(lo) else f"[{lo:.3g}, {hi:.3g}]"


def optimal_section(rows: list[dict], assumptions: list[str]) -> list[str]:
    if not rows:
        return []
    table = [[r["arm"], r["law"], r["source"], r["shape"], f"{r['exponent']:.3g}" if r["exponent"] is not None else "–",
              _ci(r["ci95_low"], r["ci95_high"]), _degenerate(r), _local(r), f"{r['paper']}",
              r["paper_in_ci"] or "no interval",
              f"{r['d_star_low_c']:.0f}→{r['d_star_high_c']:.0f}" if r["shape"] == "depth" else
              f"{r['w_star_low_c']}→{r['w_star_high_c']}"] for r in rows]
    c_low, c_high = rows[0]["c_low"], rows[0]["c_high"]
    return ["## 4.2 Compute-optimal depth and width against C (compute_optimal.csv)", "",
            f"Each shape law minimised over (D, W) at fixed compute C = 6·N_total·T, at {c_low:.2g}–"
            f"{c_high:.2g} FLOPs (the suite's own range: no extrapolation); D* ∝ C^a, W* ∝ C^b as "
            "least-squares slopes over those budgets. Intervals: each cluster-bootstrap draw of the "
            "fit (whole runs resampled) re-solved, 95% percentile. The paper: depth "
            f"C^{PAPER_SHAPE_EXPONENTS['depth']}, width C^{PAPER_SHAPE_EXPONENTS['width']} (no "
            "interval stated). Gemstones: the authors' released width-depth parameters (cool-down, "
            "half learning rate) optimised the same way — exponents implied by their parameters, "
            "computed here; no compute-optimal depth or width exponent of the authors' is in the "
            "material available to this study (their released files and the model cards), so none "
            "is quoted. shape_quadratic holds ln(D/W) at its optimum m by construction, so its two "
            "exponents are equal (a third of N*'s) whatever the data.", "",
            "Degenerate draws: a bootstrap draw whose optimum has D* at the search limit D = 200 for "
            "some budget, a shape term that no longer varies over the suite's shapes (range < 0.002 "
            "nats: the width or depth term of gemstones_width_depth, the bowl of shape_quadratic), or "
            "no shape optimum at all. Such a draw's exponent is an artefact of the search, not an "
            "estimate: the 95% column is over the other draws; the next column gives how many were "
            "set aside (why: compute_optimal.csv) and the interval over all draws, so no end is set "
            "by them silently. Local: the least-squares exponent over the lower and the upper half "
            "of the budgets (point fit), showing how the exponent drifts along the range.", "",
            *_beyond(rows),
            markdown_table(["arm", "law", "source", "shape", "exponent", "95% (degenerate draws out)",
                            "degenerate draws; 95% with them", "local: lower → upper half", "paper",
                            "paper in 95%", "D* or W* over the range"], table, "llllrrrrrll"), "",
            "Assumptions of the search:", ""] + [f"- {a}" for a in assumptions] + [""]


def _degenerate(r: dict) -> str:
    if r["source"] != "fit (cluster bootstrap)" or not r["bootstrap_draws"] and not r["degenerate_draws"]:
        return "–"
    return f"{r['degenerate_draws']} of {r['bootstrap_draws'] + r['degenerate_draws']}; " + _ci(
        r["ci95_all_draws_low"], r["ci95_all_draws_high"])


def _local(r: dict) -> str:
    lo, hi = r.get("local_lower_half"), r.get("local_upper_half")
    return "–" if lo is None or hi is None else f"{lo:.3g} → {hi:.3g}"


def _beyond(rows: list[dict]) -> list[str]:
    far = sorted({f"{r['law']} on {r['arm']}" for r in rows if r["d_star_beyond_deepest_run"]})
    return [f"D* passes the suite's deepest run (80 layers) for {', '.join(far)}: there the optimum "
            "is an extrapolation in depth, not a shape the data contain.", ""] if far else []


def prediction_section(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    table = [_prediction_cells(r) for r in rows]
    return ["## 5. Prediction: fit on the small shapes, predict the large ones and the last budgets "
            "(prediction.csv)", "",
            f"Every law fitted (least squares, bare: as a rollout step) on the shapes with N ≤ {SMALL:.0e} "
            f"at all but the last {LAST_BUDGETS} token budgets; error = observed − predicted (nats) on "
            f"{'; '.join(repr(h) for h in HELD_OUT)}. Against the shape-agnostic baseline: RMSE − RMSE({BASELINE}) on the "
            "same checkpoints (negative: the law predicts better), 95% cluster bootstrap over the held-out "
            "runs with the fits held fixed (which runs were held out, not the fit's own uncertainty). "
            "Kink laws whose fit collapses to chinchilla predict as it does (tied fits). " + VERDICT_RULE, "",
            markdown_table(PREDICTION_COLUMNS, table, PREDICTION_ALIGN), ""]


def later_section(rows: list[dict]) -> list[str]:
    """The later budgets: gemstones_100b_plus fitted to 100B tokens, asked for 110B–350B."""
    if not rows:
        return []
    table = [_prediction_cells(r) for r in rows]
    return [f"## 5b. The later budgets: fit to 100B tokens, predict to 350B ({LATER_TABLE}, later_budgets.csv)", "",
            f"The same 22 hot runs read on to 350B tokens (`{LATER_TABLE}`; its checkpoints to 100B are the "
            "`gemstones` table's). Every law fitted (least squares, bare) on all shapes' checkpoints to 100B, "
            "then asked for each shape's later checkpoints: a rollout in tokens, 1.1× to 3.5× past the "
            f"last fitted budget; and, the prediction's hardest case carried on ('{LATER_HARDEST}'), fitted "
            f"on the shapes with N ≤ {SMALL:.0e} at their checkpoints to 100B, asked for the larger shapes' "
            "checkpoints past it (a rollout in size and tokens at once). Error = observed − predicted (nats; positive: the run did worse than "
            f"predicted); RMSE − RMSE({BASELINE}) with its 95% cluster bootstrap over the runs (fits held "
            "fixed). The runs never cool down, so the later checkpoints are still mid-run. " + VERDICT_RULE, "",
            markdown_table(PREDICTION_COLUMNS, table, PREDICTION_ALIGN), ""]


#: how prediction.verdict decides, in the sections' words
VERDICT_RULE = (f"'runs worse': the held-out runs each predicted worse than by {BASELINE} on their own "
                "checkpoints (ties to 0.1 millinat apart); 'swap p': the two-sided test that swaps the two "
                "laws' predictions run by run (every swap of whole runs a null value of the summed squared-error "
                f"difference; exact up to {SWAPS_EXACT_TO} runs, past that {SWAP_DRAWS:,} random swaps). Worse or "
                f"better needs the interval to exclude 0 and swap p ≤ {SWAP_LEVEL:g}, else 'not distinguished'; "
                "fewer than 6 runs that tell the laws apart can never pass that test, so they get no verdict.")
PREDICTION_COLUMNS = ["arm", "held out", "law", "runs", "checkpoints", "mean error", "RMSE", f"RMSE − {BASELINE}",
                      "95%", "runs worse", "swap p", "verdict", "status"]
PREDICTION_ALIGN = "lllrrrrrrrrll"


def _prediction_cells(r: dict) -> list:
    """A row of the prediction and later-budget tables (prediction.csv, later_budgets.csv)."""
    return [r["arm"], r["held_out"], r["law"], r["runs"], r["checkpoints"], _n(r["mean_error"]), _n(r["rmse"], "{:.4f}"),
            _n(r["rmse_minus_chinchilla"]), _ci(r["ci95_low"], r["ci95_high"]), r["runs_worse"],
            f"{r['swap_p']:.3g}", r["verdict"], r["status"]]


def _n(v, spec: str = "{:+.4f}") -> str:
    return "–" if v is None else spec.format(v)


def figures_section(lines: list[str]) -> list[str]:
    return (["## 6. Figures", ""] + [f"- {line}" for line in lines] + [""]) if lines else []

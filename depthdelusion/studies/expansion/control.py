"""The control of the growth claim: the grown model against a static model of its parent's depth
trained for the same FLOPs (experiments/depth_expansion_static_control.yaml).

The compute-matched test (`trials.measure_growth`) compares the grown arm with a deeper model from
scratch; at equal FLOPs the grown arm sees more tokens than that model, so a saving there may come
from the tokens, not from growing. A model that never grew, at the parents' depth, sees still more
tokens for the same FLOPs: if growing helps, the grown arm must beat it too.

Reads the grown and scratch arms from OUT/growth_matched.csv (what `expansion-growth --runs`
wrote) and the static arm from the control sweep's finished runs. Each arm's lr is chosen on the
seeds that are not test seeds by the same rule (`trials.best_lr`); the differences are measured on
the test seeds, each arm at its lr: Welch's t interval (seed_intervals.welch_interval: the arms
are separate trainings) with the paired t interval by init seed beside it. While runs of the
control grid are unfinished the report opens with the PARTIAL label. Writes into OUT:
static_control.csv (the static arm's runs), static_control_comparison.csv,
static_control_summary.json and static_control.md.
"""
from __future__ import annotations

import csv
import io
import json
import math
from typing import Callable, NamedTuple

from depthdelusion import rundir
from depthdelusion.analysis.fitting.seed_intervals import mean_se, paired_interval, welch_interval
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.studies.common import planned_runs
from depthdelusion.studies.expansion.trials import RUN_NAME, best_lr
from depthdelusion.sweep import load_grid

ARMS = ("grown", "scratch", "static")
GROWTH_COLUMNS = ("arm", "lr", "seed", "eval_loss", "flops")


class PlannedRun(NamedTuple):
    name: str


def read_growth_rows(path) -> list[dict]:
    """The grown and scratch arms' runs from a growth_matched.csv (`trials.measure_growth`)."""
    path = rundir.as_path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: not found; write it first with "
                                "depthdelusion expansion-growth --runs GROWTH_SWEEP --out ...")
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    missing = [c for c in GROWTH_COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise ValueError(f"{path}: expected the columns {', '.join(GROWTH_COLUMNS)} and at least one row"
                         + (f"; missing {', '.join(missing)}" if missing else ""))
    return [{"arm": r["arm"], "lr": float(r["lr"]), "seed": int(r["seed"]),
             "eval_loss": float(r["eval_loss"]), "flops": float(r["flops"])} for r in rows]


def read_static_arm(control) -> list[dict]:
    """One row per finished (or diverged: loss +inf) run of the control sweep."""
    control = rundir.as_path(control)
    if not control.is_dir():
        raise FileNotFoundError(f"--static-control {control}: no such directory (train it with the "
                                "sweep command in experiments/depth_expansion_static_control.yaml)")
    names = [d.name for d in control.iterdir() if d.is_dir() and RUN_NAME.match(d.name)]
    if not names:
        raise ValueError(f"--static-control {control}: no run directories named "
                         "dDEPTH_wWIDTH_stepsSTEPS_lrLR_seedSEED in it (is it the control sweep's --out?)")
    losses, summaries = planned_runs.results("eval_loss", control)
    rows = []
    for name in sorted(losses):
        match = RUN_NAME.match(name)
        if not match:
            continue
        _, _, _, lr, seed = match.groups()
        rows.append({"arm": "static", "lr": float(lr), "seed": int(seed), "eval_loss": losses[name],
                     "flops": float(summaries[name].get("flops") or math.nan),
                     "tokens": summaries[name].get("tokens"), "run": name})
    return rows


def _arm_at(rows: list[dict], arm: str, lr: float, seeds: list[int]) -> dict[int, dict]:
    return {r["seed"]: r for r in rows if r["arm"] == arm and r["lr"] == lr and r["seed"] in seeds}


def compare(a: str, b: str, rows: list[dict], lrs: dict, test_seeds: list[int]) -> dict:
    """a − b on the test seeds, each arm at its chosen lr: means ± SD, Welch's and the paired
    t interval; `not_tested` (and no numbers) when a test seed is missing on either side."""
    at = {arm: _arm_at(rows, arm, lrs[arm], test_seeds) for arm in (a, b)}
    out = {"comparison": f"{a} - {b}", "lr_a": lrs[a], "lr_b": lrs[b],
           "test_seeds": " ".join(map(str, test_seeds))}
    missing = {arm: sorted(set(test_seeds) - set(at[arm])) for arm in at}
    if any(missing.values()):
        return {**out, "not_tested": "no finished run of the test seeds at the chosen lr: " + "; ".join(
            f"{arm} lr {lrs[arm]:g} seeds {', '.join(map(str, m))}" for arm, m in missing.items() if m)}
    va = [at[a][s]["eval_loss"] for s in test_seeds]
    vb = [at[b][s]["eval_loss"] for s in test_seeds]
    try:
        welch, paired = welch_interval(va, vb), paired_interval(va, vb)
    except ValueError as err:  # a test seed diverged at the chosen lr
        return {**out, "not_tested": str(err)}
    return {**out, "mean_a": mean_se(va)[0], "sd_a": mean_se(va)[1], "mean_b": mean_se(vb)[0],
            "sd_b": mean_se(vb)[1], "diff": welch.estimate, "welch_lo": welch.lo, "welch_hi": welch.hi,
            "welch_df": welch.df, "paired_lo": paired.lo, "paired_hi": paired.hi,
            "flops_ratio": sum(at[a][s]["flops"] for s in test_seeds) / sum(at[b][s]["flops"] for s in test_seeds)}


def planned_progress(grid, static_rows: list[dict]) -> tuple[int, list]:
    """(runs of the control grid finished or diverged, the grid's runs not yet done)."""
    done = {r["run"] for r in static_rows}
    planned = load_grid(grid).runs
    todo = [PlannedRun(name) for name, _ in planned if name not in done]
    return len(planned) - len(todo), todo


def static_control_study(out, control, grid, *, test_seeds: list[int],
                         log: Callable[[str], None] = print) -> dict:
    """The grown and scratch arms (OUT/growth_matched.csv) against the static control, each arm's
    lr chosen on the seeds other than `test_seeds` (at least one; `trials.GrowthSpec` checks the
    command's), the difference measured on `test_seeds`."""
    out = rundir.as_path(out)
    static = read_static_arm(control)
    rows = read_growth_rows(out / "growth_matched.csv") + static
    tuning = [r for r in rows if r["seed"] not in test_seeds]
    chosen = {}
    for arm in ARMS:
        if not any(r["arm"] == arm for r in tuning):
            raise ValueError(f"no {arm} run on a tuning seed (seeds other than {test_seeds}) to choose its lr from")
        lr, _, edge, fit = best_lr(tuning, arm)
        chosen[arm] = {"lr": lr, "at_grid_edge": edge, "lr_fit": fit}
    lrs = {arm: chosen[arm]["lr"] for arm in ARMS}
    comparisons = [compare("grown", "static", rows, lrs, test_seeds),
                   compare("scratch", "static", rows, lrs, test_seeds)]
    done, todo = planned_progress(grid, static)
    summary = {"finished_of_planned": [done, done + len(todo)], "test_seeds": test_seeds, "arms": chosen,
               "lr_rule": "trials.best_lr (the depth-confound rule) on the seeds other than the test seeds",
               "interval": "Welch's t on the test seeds (paired t by init seed beside it)",
               "comparisons": comparisons}
    out.mkdir(parents=True, exist_ok=True)
    _write_rows(out / "static_control.csv", [{k: r[k] for k in ("run", "lr", "seed", "eval_loss", "flops", "tokens")}
                                             for r in static])
    _write_rows(out / "static_control_comparison.csv", comparisons)
    (out / "static_control_summary.json").write_text(json.dumps(_rounded(summary), indent=2) + "\n")
    text = control_markdown(summary, static, done, todo, control, grid)
    (out / "static_control.md").write_text(text)
    log(text)
    return summary


def _rounded(obj):
    """Floats at 6 significant digits (the losses are read at 6; the lr fit's last bits would
    differ between BLAS builds)."""
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_rounded(v) for v in obj]
    return float(f"{obj:.6g}") if isinstance(obj, float) and math.isfinite(obj) else obj


def _write_rows(path, rows: list[dict]) -> None:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    write_csv(path, columns, [{k: (f"{r[k]:.6g}" if isinstance(r.get(k), float) else r.get(k, ""))
                               for k in columns} for r in rows])


def control_markdown(summary: dict, static: list[dict], done: int, todo: list, control, grid) -> str:
    """The generated section: the label while runs are missing, the static arm's lr grid, the
    comparisons (hand-written reading: README.md)."""
    lines = ["# Growth against the static control at equal FLOPs (`depthdelusion expansion-growth "
             "--static-control`)", ""]
    lines += planned_runs.partial_lines(done, todo, resume=(
        f"(grid `{grid}`). Train the rest with the sweep command in that file (it resumes), then "
        "rerun this command."))
    lines += planned_runs.not_finished_lines(todo)
    tests = summary["test_seeds"]
    by_lr: dict = {}
    for r in static:
        by_lr.setdefault(r["lr"], []).append(r)
    grid_rows = []
    for lr, rs in sorted(by_lr.items()):
        tune = [r["eval_loss"] for r in rs if r["seed"] not in tests]
        held = [f"{r['eval_loss']:.4f}" for r in sorted(rs, key=lambda r: r["seed"]) if r["seed"] in tests]
        grid_rows.append([f"{lr:g}", f"{sum(tune) / len(tune):.4f} ({len(tune)})" if tune else "–",
                          ", ".join(held) or "–", "chosen" if lr == summary["arms"]["static"]["lr"] else ""])
    lines += [f"Static arm (`{control}`): validation loss by lr, mean over the tuning seeds (how many) and "
              f"the test seeds {', '.join(map(str, tests))} one by one.", "",
              markdown_table(["lr", "tuning mean (n)", "test seeds", ""], grid_rows, align="rrll"), ""]
    lines += ["Lrs chosen on the tuning seeds: " + ", ".join(
        f"{arm} {c['lr']:g}" + (" (best at the grid's edge: not bracketed)" if c["at_grid_edge"] else "")
        for arm, c in summary["arms"].items()) + ".", ""]
    table = []
    for c in summary["comparisons"]:
        if "not_tested" in c:
            table.append([c["comparison"], "not tested: " + c["not_tested"], "", "", "", "", ""])
            continue
        table.append([c["comparison"], f"{c['lr_a']:g} / {c['lr_b']:g}", f"{c['mean_a']:.4f} ± {c['sd_a']:.4f}",
                      f"{c['mean_b']:.4f} ± {c['sd_b']:.4f}", f"{c['diff']:+.4f}",
                      f"[{c['welch_lo']:+.4f}, {c['welch_hi']:+.4f}] (df {c['welch_df']:.1f})",
                      f"[{c['paired_lo']:+.4f}, {c['paired_hi']:+.4f}]"])
    lines += ["Validation loss on the test seeds, mean ± SD over seeds; difference with its 95% Welch t "
              "interval and, beside it, the paired t interval by init seed.", "",
              markdown_table(["a − static", "lr a / static", "a: mean ± SD", "static: mean ± SD", "a − static",
                              "Welch 95%", "paired 95%"], table, align="llllrll")]
    return "\n".join(lines) + "\n"

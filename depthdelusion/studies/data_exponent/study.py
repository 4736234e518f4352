"""`depthdelusion data-exponent ROOT`: the data exponent predicted from spectra against the one
measured by a token sweep.

ROOT holds one directory per token sweep (`depthdelusion sweep experiments/data_exponent.yaml
--out ROOT/NAME ...`): every run of a sweep has the same shape and corpus and its own budget. Per
sweep:

- measured: L(T) = E + B·T^(−b) (the law `data_power`, analysis/science/data_power.py) fitted by the project's engine
  (analysis.fitting.fit, least squares) to the runs' held-out loss (summary.json `eval_loss`),
  with b's profile-likelihood interval;
- predicted, from every run's checkpoint: `depthdelusion spectrum`'s per-layer residual-stream
  spectra (written to RUN/spectrum/, as that command writes them), and the LM head's input
  features h (the final norm's output) over the same held-out tokens: their spectrum's tail β and
  the readout's source smoothness s (analysis/science/readout.py states the estimator), giving
  b = 2βs/(2βs+1) with a jackknife interval (RUN/spectrum/readout.csv). The prediction quoted
  per sweep is its largest budget's (the best-trained representation and head); the others show
  how it moves with training.

Outputs in OUT: tables.md (every table, wall times, seeds, commands; the study's README.md with
the verdict is written by hand from it), run.json, exponents.csv (one row per sweep), runs.csv (one row per run), spectra.csv (one row per measured run), learning_curves.png
and exponents.png. ROOT and OUT may be local or gs:// (the run directories read and RUN/spectrum/
written through rundir.as_path; OUT's files written to a local directory, then copied up).

The study's shape: its spec (`DataExponentSpec`, from the command's flags by `spec.from_flags`),
`measure` to a frozen `DataExponentResults` (or `refit`, from a written study's tables), `sections`
to tables.md; the CSVs, run.json and figures written from the same results (`write_outputs`). The
law, its fit, the local slopes and the verdict are numpy in `analysis/science/data_power.py`.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import shlex
import time
from pathlib import Path

import numpy as np

from depthdelusion import exit_codes, rundir
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.analysis.report import plots
from depthdelusion.analysis.science import data_power, readout, spectra
from depthdelusion.config import bounded
from depthdelusion.option_fields import command_words
from depthdelusion.studies.common.spec import from_flags
from depthdelusion.studies.data_exponent.options import DataExponentOptions

SPECTRUM_ROWS = 16
EXPONENT_COLUMNS = ("sweep", "depth", "width", "zipf", "runs", "tokens_min", "tokens_max", "E", "B",
                    "b_measured", "b_lo", "b_hi", "fit_rmse", "beta_head", "beta_head_lo",
                    "beta_head_hi", "beta_last_block", "beta_last_block_lo", "beta_last_block_hi",
                    "s", "s_lo", "s_hi", "b_predicted", "b_pred_lo", "b_pred_hi", "rank_lo",
                    "rank_hi", "verdict", "train_wall_s", "common_tokens_max", "b_common",
                    "b_common_lo", "b_common_hi", "beta_head_common", "s_common", "b_pred_common",
                    "b_pred_common_lo", "b_pred_common_hi", "at_bound")


@dataclasses.dataclass
class Run:
    name: str
    path: Path
    steps: int
    tokens: int
    eval_loss: float
    wall_s: float
    depth: int
    width: int
    zipf: float
    seed: int
    data_seed: int


def discover(root: Path) -> dict[str, list[Run]]:
    """{sweep name: its finished runs by budget} for every directory of ROOT holding run
    directories; a sweep mixing shapes or corpora is an error naming it."""
    root = rundir.as_path(root)
    sweeps: dict[str, list[Run]] = {}
    for run_dir in rundir.find_runs(root):
        if str(run_dir.parent.parent) != str(root):  # ROOT/SWEEP/RUN only
            continue
        s = rundir.read_summary(run_dir)
        if s.get("status") != "finished":
            continue
        if s.get("eval_loss") is None:
            raise ValueError(f"{run_dir / rundir.SUMMARY}: no eval_loss (train with train.eval_batches > 0)")
        missing = [k for k in ("steps", "tokens", "wall_time_s") if k not in s]
        if missing:
            raise ValueError(f"{run_dir / rundir.SUMMARY}: missing {', '.join(missing)}; not a summary "
                             "written by `depthdelusion train`")
        cfg = rundir.read_config(run_dir)
        if cfg is None:
            raise FileNotFoundError(f"{run_dir}: no {rundir.CONFIG} beside its {rundir.SUMMARY}")
        sweeps.setdefault(run_dir.parent.name, []).append(Run(
            run_dir.name, run_dir, int(s["steps"]), int(s["tokens"]), float(s["eval_loss"]),
            float(s["wall_time_s"]), cfg.model.depth, cfg.model.width, cfg.data.builtin_zipf_exponent,
            cfg.train.seed, cfg.data.seed))
    if not sweeps:
        raise FileNotFoundError(f"{root}: no finished runs in ROOT/SWEEP/RUN/summary.json")
    for name, runs in sweeps.items():
        runs.sort(key=lambda r: r.tokens)
        kinds = {(r.depth, r.width, r.zipf) for r in runs}
        if len(kinds) > 1:
            raise ValueError(f"{root / name}: one sweep must hold one shape and corpus; found "
                             f"(depth, width, zipf) = {sorted(kinds)}")
    return sweeps


def fit_sweep(runs: list[Run]):
    """The data_power fit of one sweep (`data_power.fit_data_power`: profile intervals)."""
    # one shape per sweep: the law does not use N, so the parameter count is a placeholder
    records = [{"name": r.name, "depth": r.depth, "width": r.width, "params": 1, "tokens": r.tokens,
                "loss": r.eval_loss} for r in runs]
    return data_power.fit_data_power(records, str(runs[0].path.parent))


def head_input_moments(graphdef, params, cfg, batches, groups: int):
    """Per token group: (Moments of the LM head's input h, next-token counts (V,))."""
    # JAX here, not at the top: --refit-tables reads a written study's tables and never loads a
    # model, so it does not pay JAX's import (about 13 s measured with flax)
    import jax
    from flax import nnx

    from depthdelusion.model.transformer import Taps
    from depthdelusion.studies.common.spectrum import Moments, batch_moments, empty_moments

    @jax.jit
    def forward(params, tokens_BxS1):
        taps = Taps(head_input_fn=batch_moments)  # the moments of the head's input only
        mean, m2 = nnx.merge(graphdef, params).forward(tokens_BxS1[:, :-1], taps).head_input
        return mean[None], m2[None]

    vocab = cfg.model.vocab_size
    out = [(empty_moments(), np.zeros(vocab)) for _ in range(groups)]
    for b, tokens in enumerate(batches):
        mean, m2 = jax.device_get(forward(params, tokens))
        g = b * groups // len(batches)
        n = tokens.shape[0] * (tokens.shape[1] - 1)
        counts = np.bincount(np.asarray(tokens)[:, 1:].ravel(), minlength=vocab)[:vocab]
        out[g] = (out[g][0] + Moments(n, mean.astype(np.float64), m2.astype(np.float64)),
                  out[g][1] + counts)
    return out


def _eig_and_p(parts) -> tuple:
    from depthdelusion.studies.common.spectrum import total_moments  # JAX: see head_input_moments

    moments = total_moments([m for m, _ in parts])
    counts = np.sum([c for _, c in parts], axis=0)
    evals, evecs = np.linalg.eigh(moments.covariance()[0])
    return evals[::-1], evecs[:, ::-1], counts / counts.sum()


def measure_run(run: Run, tokens: int, rows: int, groups: int = 8) -> tuple[readout.SourceFit, dict]:
    """Writes RUN/spectrum/ (the spectrum command's files and readout.csv); returns the head-input
    source fit and the residual-stream tail fits' last layer."""
    from depthdelusion.studies.common import spectrum  # JAX: see head_input_moments

    start = time.perf_counter()
    full, fits, info = spectrum.measure(run.path, tokens, rows, groups)
    command = f"depthdelusion spectrum {shlex.quote(str(run.path))} --tokens {tokens} --rows {rows}"
    spectrum.write_outputs(full, fits, info, run.path / "spectrum", command)
    cfg, _, graphdef, params = spectrum.load_run(run.path)
    batches = spectrum.validation_tokens(cfg, tokens, rows)
    groups = min(groups, len(batches)) // 2 * 2
    parts = head_input_moments(graphdef, params, cfg, batches, groups)
    all_eig = _eig_and_p(parts)
    half_a, half_b = _eig_and_p(parts[:groups // 2]), _eig_and_p(parts[groups // 2:])
    jack = [_eig_and_p(parts[:g] + parts[g + 1:]) for g in range(groups)]
    n_tokens = sum(m.n for m, _ in parts)
    tail = spectra.tail_fit(cfg.model.depth + 1, all_eig[0], (half_a[0], half_b[0]),
                            [j[0] for j in jack], n_tokens)
    head_WxV = np.asarray(params["head_kernel"], np.float64)
    fit = readout.source_fit(all_eig, jack, head_WxV, tail.rank_range, tail.beta, tail.ci, n_tokens)
    readout.write_readout_csv(fit, run.path / "spectrum" / "readout.csv")
    return fit, {"last_block": fits[-1], "seconds": time.perf_counter() - start, "tokens": n_tokens}


def _f(x, d=3) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{d}f}"


def _ci(lo, hi, d=3) -> str:
    return f"[{_f(lo, d)}, {_f(hi, d)}]"


@dataclasses.dataclass(frozen=True)
class DataExponentSpec:
    """What `depthdelusion data-exponent ROOT` measures (its flags, read by `spec.from_flags`):
    ROOT's sweeps, the held-out tokens and sequences per forward pass of every run's spectra, and
    whether only each sweep's largest budget is measured."""

    root: str
    tokens: int = bounded(DataExponentOptions.tokens, ge=1)
    rows: int = bounded(SPECTRUM_ROWS, ge=1)
    largest_only: bool = False
    sweep_commands: list[str] = dataclasses.field(default_factory=list)  # quoted in tables.md

    def validate(self) -> None:
        pass  # every field stands alone


@dataclasses.dataclass(frozen=True)
class DataExponentResults:
    """What the study measured, as the rows of its CSVs (rendered by `sections`; a refitted study
    holds the rows read back from its tables, b refitted)."""

    exponents: tuple  # one row per sweep (EXPONENT_COLUMNS)
    runs: tuple  # one row per run
    spectra: tuple  # one row per measured run
    curves: dict  # sweep -> (its Runs, its data_power fit or None)
    local_slopes: dict  # sweep -> −Δln L / Δln T between its consecutive budgets
    info: dict  # run.json: commands, root, tokens, rows, timing, seeds, study_s (refit_command)
    refit: bool = False  # refitted from a written study: its runs.csv and spectra.csv not rewritten


def _results(exponents, run_rows, spectrum_rows, curves, info, refit=False) -> DataExponentResults:
    slopes = {name: data_power.local_slopes([(r["tokens"], r["eval_loss"]) for r in run_rows if r["sweep"] == name])
              for name in dict.fromkeys(r["sweep"] for r in run_rows)}
    return DataExponentResults(tuple(exponents), tuple(run_rows), tuple(spectrum_rows), curves, slopes,
                               info, refit)


def _spectrum_row(name: str, r: Run, src, extra: dict) -> dict:
    last = extra["last_block"]
    return {"sweep": name, "run": r.name, "tokens": r.tokens, "beta_head": _r(src.beta),
            "beta_head_lo": _r(src.beta_ci[0]), "beta_head_hi": _r(src.beta_ci[1]),
            "beta_last_block": _r(last.beta), "decay": _r(src.decay), "s": _r(src.s),
            "s_lo": _r(src.s_ci[0]), "s_hi": _r(src.s_ci[1]), "b_predicted": _r(src.b_pred),
            "b_pred_lo": _r(src.b_pred_ci[0]), "b_pred_hi": _r(src.b_pred_ci[1]),
            "rank_lo": src.rank_range[0] if src.rank_range else "",
            "rank_hi": src.rank_range[1] if src.rank_range else "", "spectrum_tokens": extra["tokens"]}


def _exponent_row(name: str, runs: list[Run], result, top: tuple, common: dict) -> dict:
    """One sweep's row: its fit, its largest budget's prediction, the verdict, the common cells."""
    r_top, src, extra = top
    last = extra["last_block"]
    if result is not None:
        b, (b_lo, b_hi) = result.params["beta"], result.ci_profile["beta"]
        E, B, rmse = result.params["E"], result.params["B"], result.rmse
    else:
        b = b_lo = b_hi = E = B = rmse = math.nan
    return {
        "sweep": name, "depth": r_top.depth, "width": r_top.width, "zipf": r_top.zipf,
        "runs": len(runs), "tokens_min": runs[0].tokens, "tokens_max": runs[-1].tokens,
        "E": _r(E), "B": _r(B, 4), "b_measured": _r(b), "b_lo": _r(b_lo), "b_hi": _r(b_hi),
        "fit_rmse": _r(rmse, 4), "beta_head": _r(src.beta), "beta_head_lo": _r(src.beta_ci[0]),
        "beta_head_hi": _r(src.beta_ci[1]), "beta_last_block": _r(last.beta),
        "beta_last_block_lo": _r(last.ci[0]), "beta_last_block_hi": _r(last.ci[1]),
        "s": _r(src.s), "s_lo": _r(src.s_ci[0]), "s_hi": _r(src.s_ci[1]),
        "b_predicted": _r(src.b_pred), "b_pred_lo": _r(src.b_pred_ci[0]),
        "b_pred_hi": _r(src.b_pred_ci[1]),
        "rank_lo": src.rank_range[0] if src.rank_range else "",
        "rank_hi": src.rank_range[1] if src.rank_range else "",
        "verdict": data_power.verdict((b_lo, b_hi), src.b_pred_ci) if result is not None else "too few runs",
        "at_bound": " ".join(result.at_bound) if result is not None else "",
        "train_wall_s": round(sum(r.wall_s for r in runs), 1), **common}


def _measure_sweep(spec: DataExponentSpec, name: str, runs: list[Run], common_max: int, log) -> tuple:
    """(exponent row, spectrum rows, the fit, timing) of one sweep; writes RUN/spectrum/."""
    t_fit = time.perf_counter()
    result = fit_sweep(runs) if len(runs) >= 5 else None
    t_fit = time.perf_counter() - t_fit
    t_spec = time.perf_counter()
    per_run, spectrum_rows = [], []
    for r in runs[-1:] if spec.largest_only else runs:
        src, extra = measure_run(r, spec.tokens, spec.rows)
        per_run.append((r, src, extra))
        spectrum_rows.append(_spectrum_row(name, r, src, extra))
        log(f"{name}/{r.name}: eval {r.eval_loss:.4f}, β(head) {_f(src.beta)}, s {_f(src.s)}, "
            f"b pred {_f(src.b_pred)}")
    t_spec = time.perf_counter() - t_spec
    common = [r for r in runs if r.tokens <= common_max]
    result_common = (result if len(common) == len(runs) else
                     fit_sweep(common) if len(common) >= 5 else None)
    src_common = next((src for r, src, _ in per_run if r.tokens == common_max), None)
    timing = {"train_s": round(sum(r.wall_s for r in runs), 1), "fit_s": round(t_fit, 2),
              "spectra_s": round(t_spec, 1)}
    row = _exponent_row(name, runs, result, per_run[-1],
                        {"common_tokens_max": common_max, **_common_cells(result_common, src_common)})
    return row, spectrum_rows, result, timing


def measure(spec: DataExponentSpec, *, command: str = "", log=print) -> DataExponentResults:
    """Fits, spectra and readout estimates of every sweep under ``spec.root`` (writing each
    measured run's RUN/spectrum/, as `depthdelusion spectrum` does); ``command`` is the one
    quoted in tables.md."""
    t0 = time.perf_counter()
    root = rundir.as_path(spec.root)
    sweeps = discover(root)
    # budgets every sweep has: the knob's comparison fits each sweep over these alone
    common_max = min(runs[-1].tokens for runs in sweeps.values())
    exponent_rows, run_rows, spectrum_rows, curves, timing = [], [], [], {}, {}
    for name, runs in sorted(sweeps.items()):
        run_rows += [{"sweep": name, "run": r.name, "steps": r.steps, "tokens": r.tokens,
                      "eval_loss": round(r.eval_loss, 4), "train_wall_s": round(r.wall_s, 1)}
                     for r in runs]
        row, rows, result, timing[name] = _measure_sweep(spec, name, runs, common_max, log)
        exponent_rows.append(row)
        spectrum_rows += rows
        curves[name] = (runs, result)
    info = {"command": command, "sweep_commands": list(spec.sweep_commands), "root": str(root),
            "spectrum_tokens": spec.tokens, "rows": spec.rows, "timing": timing,
            "seeds": sorted({(r.seed, r.data_seed) for runs in sweeps.values() for r in runs}),
            "study_s": round(time.perf_counter() - t0, 1)}
    return _results(exponent_rows, run_rows, spectrum_rows, curves, info)


def write_outputs(r: DataExponentResults, out: Path) -> None:
    """exponents.csv, runs.csv and spectra.csv (not rewritten by a refit), the figures, run.json
    and tables.md in the local directory ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "exponents.csv", EXPONENT_COLUMNS, r.exponents)
    if not r.refit:
        write_csv(out / "runs.csv", r.runs[0], r.runs)
        write_csv(out / "spectra.csv", r.spectra[0], r.spectra)
    plot_learning_curves(r.curves, out / "learning_curves.png")
    plot_exponents(list(r.exponents), out / "exponents.png")
    (out / "run.json").write_text(json.dumps(r.info, indent=1) + "\n")
    (out / "tables.md").write_text(sections(r))


def _common_cells(result, src) -> dict:
    """The knob comparison's cells: b fitted over the common budgets, the prediction at the
    largest common budget (blank where not fitted / not measured)."""
    b, ci = (result.params["beta"], result.ci_profile["beta"]) if result is not None else (math.nan, (math.nan,) * 2)
    cells = {"b_common": _r(b), "b_common_lo": _r(ci[0]), "b_common_hi": _r(ci[1])}
    if src is None:
        return {**cells, **{k: "" for k in ("beta_head_common", "s_common", "b_pred_common",
                                            "b_pred_common_lo", "b_pred_common_hi", "at_bound")}}
    return {**cells, "beta_head_common": _r(src.beta), "s_common": _r(src.s),
            "b_pred_common": _r(src.b_pred), "b_pred_common_lo": _r(src.b_pred_ci[0]),
            "b_pred_common_hi": _r(src.b_pred_ci[1])}


def _r(x, digits: int = 3):
    return "" if x is None or not math.isfinite(x) else round(float(x), digits)


def _num(v) -> float:
    return math.nan if v in ("", None) else float(v)


def plot_learning_curves(curves: dict, path: Path) -> Path:
    plt = plots.plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (name, (runs, result)), color in zip(sorted(curves.items()), plots.colors(len(curves))):
        T = np.array([r.tokens for r in runs], float)
        # named at the fit's line, or at the points where no fit was made
        ax.loglog(T, [r.eval_loss for r in runs], "o", color=color, label=name if result is None else None)
        if result is not None:
            grid = np.geomspace(T.min(), T.max(), 50)
            p = result.params
            ax.loglog(grid, p["E"] + p["B"] * grid ** -p["beta"], "-", color=color,
                      label=f"{name}: b = {p['beta']:.2f}")
    ax.set_xlabel("tokens T (one run per budget, each with its own schedule)")
    ax.set_ylabel("held-out loss (nats/byte)")
    ax.set_title("Token sweeps: L = E + B·T^−b")
    if curves:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    return plots.save_figure(fig, path)


def plot_exponents(rows: list[dict], path: Path) -> Path:
    """Left: measured b against predicted b per sweep (each over all its budgets). Right: against
    the corpus' Zipf exponent (the sweeps at the largest width), b measured over the common budgets,
    b predicted and β of the head input at the largest common budget."""
    plt = plots.plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for row, color in zip(rows, plots.colors(len(rows))):
        x, y = _num(row["b_predicted"]), _num(row["b_measured"])
        xerr = [[x - _num(row["b_pred_lo"])], [_num(row["b_pred_hi"]) - x]]
        yerr = [[y - _num(row["b_lo"])], [_num(row["b_hi"]) - y]]
        if math.isfinite(x) and math.isfinite(y):
            ax1.errorbar([x], [y], xerr=np.abs(xerr), yerr=np.abs(np.nan_to_num(yerr, posinf=1)),
                         fmt="o", color=color, capsize=3, label=row["sweep"])
    lim = [0, 1]
    ax1.plot(lim, lim, "k--", lw=0.8, label="measured = predicted")
    ax1.set_xlabel("predicted b = 2βs/(2βs+1) (jackknife 95%)")
    ax1.set_ylabel("measured b (profile likelihood 95%)")
    ax1.legend(fontsize=7)
    ax1.grid(alpha=0.3)
    knob = sorted((r for r in rows if str(r["width"]) == str(max(int(q["width"]) for q in rows))),
                  key=lambda r: float(r["zipf"]))
    z = [float(r["zipf"]) for r in knob]
    for key, lo, hi, label, fmt in (("b_common", "b_common_lo", "b_common_hi", "b measured", "o-"),
                                    ("b_pred_common", "b_pred_common_lo", "b_pred_common_hi",
                                     "b predicted", "s--"),
                                    ("beta_head_common", "beta_head_common", "beta_head_common",
                                     "β (head input)", "^:")):
        y = np.array([_num(r[key]) for r in knob])
        err = np.abs(np.array([[_num(r[lo]) for r in knob], [_num(r[hi]) for r in knob]]) - y)
        ax2.errorbar(z, y, yerr=np.nan_to_num(err, nan=0, posinf=1), fmt=fmt, capsize=3, label=label)
    ax2.set_xlabel("corpus lexicon Zipf exponent (data.builtin_zipf_exponent)")
    ax2.set_ylabel("exponent")
    ax2.set_title(f"Redundancy knob, W = {knob[0]['width']}, T ≤ {int(knob[0]['common_tokens_max']):,}"
                  if knob else "Redundancy knob", fontsize=10)
    ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3)
    return plots.save_figure(fig, path)


def _with_ci(r, key, lo, hi) -> str:
    return f"{_f(_num(r[key]))} {_ci(_num(r[lo]), _num(r[hi]))}"


def _head_lines(r: DataExponentResults) -> list[str]:
    info = r.info
    return ["# Data exponent: predicted from spectra vs measured by token sweeps (tables)", "",
            "Generated by `" + info["command"] + "`"
            + (f"; measured b refitted from runs.csv by `{info['refit_command']}`"
               if info.get("refit_command") else "")
            + ". b measured: L = E + B·T^−b fitted to held-out "
            "loss (least squares; profile-likelihood 95% interval, F(1, n − 3)-calibrated: with 6 "
            "runs and 3 parameters χ²₁ would give intervals far too narrow). Prediction from the largest "
            "budget's checkpoint: β of the LM head's input features, s from its readout "
            "(analysis/science/readout.py), b = 2βs/(2βs+1); jackknife 95% over 8 token groups. Verdict: "
            "'consistent' when the two intervals overlap. A parameter at its bound (E = 0: no "
            "floor visible over the budgets) is named under the table.", "",
            markdown_table(
                ["sweep", "D × W", "Zipf z", "runs (tokens)", "b measured [profile 95%]",
                 "β head input [jackknife]", "β after last block [jackknife]", "s [jackknife]",
                 "b predicted [jackknife]", "ranks", "verdict"],
                [[x["sweep"], f"{x['depth']} × {x['width']}", f"{float(x['zipf']):g}",
                  f"{x['runs']} ({int(x['tokens_min']):,}–{int(x['tokens_max']):,})",
                  _with_ci(x, "b_measured", "b_lo", "b_hi"), _with_ci(x, "beta_head", "beta_head_lo", "beta_head_hi"),
                  _with_ci(x, "beta_last_block", "beta_last_block_lo", "beta_last_block_hi"),
                  _with_ci(x, "s", "s_lo", "s_hi"), _with_ci(x, "b_predicted", "b_pred_lo", "b_pred_hi"),
                  f"{x['rank_lo']}–{x['rank_hi']}", x["verdict"]] for x in r.exponents])]


def _slope_and_common_lines(r: DataExponentResults) -> list[str]:
    rows = r.exponents
    lines = ["", "Local slopes −Δln L / Δln T between consecutive budgets (no floor subtracted): "
             "a pure power law has them constant; a floor E > 0 makes them fall with T.", "",
             markdown_table(["sweep", "local slopes, smallest budgets first"],
                            [[name, ", ".join(f"{v:.3f}" for v in slopes)]
                             for name, slopes in r.local_slopes.items()])]
    bound = [f"{x['sweep']}: {x['at_bound']} at its bound" for x in rows if x["at_bound"]]
    if bound:
        lines += ["", "At a bound: " + "; ".join(bound) + " (the profile interval of b is then "
                  "conditional on it)."]
    common = int(rows[0]["common_tokens_max"])
    lines += ["", f"Common budgets (every sweep refitted over its runs with ≤ {common:,} tokens; the "
              f"prediction from the checkpoint at {common:,} tokens): the redundancy knob's comparison.",
              "", markdown_table(
                  ["sweep", "Zipf z", "b measured [profile 95%]", "β head", "s", "b predicted [jackknife]"],
                  [[x["sweep"], f"{float(x['zipf']):g}", _with_ci(x, "b_common", "b_common_lo", "b_common_hi"),
                    _f(_num(x["beta_head_common"])), _f(_num(x["s_common"])),
                    _with_ci(x, "b_pred_common", "b_pred_common_lo", "b_pred_common_hi")] for x in rows])]
    return lines


def _per_run_lines(r: DataExponentResults) -> list[str]:
    measured = {(m["sweep"], m["run"]): m for m in r.spectra}
    per_run = []
    for x in r.runs:
        m = measured.get((x["sweep"], x["run"]))
        spec = ([f"{m['beta_head']} [{m['beta_head_lo']}, {m['beta_head_hi']}]", str(m["beta_last_block"]),
                 f"{m['s']} [{m['s_lo']}, {m['s_hi']}]",
                 f"{m['b_predicted']} [{m['b_pred_lo']}, {m['b_pred_hi']}]"] if m else ["—"] * 4)
        per_run.append([x["sweep"], x["run"], x["steps"], f"{x['tokens']:,}", x["eval_loss"],
                        x["train_wall_s"], *spec])
    return ["", "Per run (held-out loss; the prediction from each budget's own checkpoint where "
            "measured — the table above quotes the largest budget's):", "",
            markdown_table(["sweep", "run", "steps", "tokens", "held-out loss", "train wall s",
                            "β head [jackknife]", "β last block", "s [jackknife]",
                            "b predicted [jackknife]"], per_run)]


def sections(r: DataExponentResults) -> str:
    """tables.md: the exponents per sweep, the local slopes, the common budgets, every run, the
    wall times, seeds and commands (formatting `r`, computing nothing)."""
    info = r.info
    lines = _head_lines(r) + _slope_and_common_lines(r) + _per_run_lines(r)
    lines += ["", "## Wall time", "", markdown_table(
        ["sweep", "training (sum of runs' wall_time_s)", "fit", "spectra + readout (all runs)"],
        [[name, f"{t['train_s']} s", f"{t['fit_s']} s", f"{t['spectra_s']} s"]
         for name, t in info["timing"].items()])]
    lines += ["", f"This command: {info['study_s']} s in all. Seeds (train.seed, data.seed): "
              f"{info['seeds']}.", ""]
    if info["sweep_commands"]:
        lines += ["Sweeps:", "", "```", *info["sweep_commands"], "```", ""]
    return "\n".join(lines)


def _read_csv(path) -> list[dict]:
    with io.StringIO(rundir.as_path(path).read_text(encoding="utf-8"), newline="") as fh:
        return list(csv.DictReader(fh))


def refit(study, *, command: str, log=print) -> DataExponentResults:
    """A written study (local or gs://) with its measured b refitted from its runs.csv (held-out
    losses, to the 4 decimals written there) with the current intervals, the spectra's columns
    kept: for a study whose run directories are not at hand. ``command`` is the refit's, quoted in
    tables.md."""
    study = rundir.as_path(study)
    run_rows = _read_csv(study / "runs.csv")
    for r in run_rows:
        r.update(steps=int(r["steps"]), tokens=int(r["tokens"]), eval_loss=float(r["eval_loss"]),
                 train_wall_s=float(r["train_wall_s"]))
    rows, spectrum_rows = _read_csv(study / "exponents.csv"), _read_csv(study / "spectra.csv")
    info = json.loads((study / "run.json").read_text())
    curves = {}
    for row in rows:
        name = row["sweep"]
        runs = [Run(r["run"], study / name / r["run"], r["steps"], r["tokens"], r["eval_loss"],
                    r["train_wall_s"], int(row["depth"]), int(row["width"]), float(row["zipf"]), 0, 0)
                for r in run_rows if r["sweep"] == name]
        curves[name] = (runs, _refit_row(row, runs, log))
    info["refit_command"] = command
    return _results(rows, run_rows, spectrum_rows, curves, info, refit=True)


def _refit_row(row: dict, runs: list[Run], log):
    """One sweep's exponent row (read from exponents.csv) updated with b refitted; its fit."""
    result = fit_sweep(runs) if len(runs) >= 5 else None
    common = [r for r in runs if r.tokens <= int(row["common_tokens_max"])]
    result_common = (result if len(common) == len(runs) else
                     fit_sweep(common) if len(common) >= 5 else None)
    if result is not None:
        b, (b_lo, b_hi) = result.params["beta"], result.ci_profile["beta"]
        row.update(E=_r(result.params["E"]), B=_r(result.params["B"], 4), b_measured=_r(b),
                   b_lo=_r(b_lo), b_hi=_r(b_hi), fit_rmse=_r(result.rmse, 4),
                   verdict=data_power.verdict((b_lo, b_hi), (_num(row["b_pred_lo"]), _num(row["b_pred_hi"]))),
                   at_bound=" ".join(result.at_bound))
        log(f"{row['sweep']}: b {_f(b)} {_ci(b_lo, b_hi)} ({result.profile_statistic}); {row['verdict']}")
    cells = _common_cells(result_common, None)
    row.update({k: cells[k] for k in ("b_common", "b_common_lo", "b_common_hi")})
    return result


def refit_study_tables(study, out: Path, log=print, command: str | None = None) -> dict:
    """`refit` the written study, its exponents.csv, figures, run.json and tables.md rewritten in
    the local directory ``out`` (``command``: by default the command for STUDY and OUT)."""
    command = command or shlex.join(["depthdelusion", "data-exponent", str(study), "--out", str(out),
                                     *command_words(DataExponentOptions(refit_tables=True))])
    r = refit(study, command=command, log=log)
    write_outputs(r, out)
    return r.info


def run_data_exponent(*, root: str, out: str, options: DataExponentOptions = DataExponentOptions()) -> int:
    """`depthdelusion data-exponent ROOT --out DIR`: the study's tables, CSVs and figures in DIR.
    With ``options.refit_tables``, ROOT is a written study: its measured b is refitted from its
    CSVs. ROOT and DIR may be local or gs:// (a gs:// DIR is written locally, then copied up)."""
    command = shlex.join(["depthdelusion", "data-exponent", str(root), "--out", str(out), *command_words(options)])
    if options.refit_tables:
        with rundir.local_dir(out) as local_out:
            refit_study_tables(root, local_out, command=command)
        print((rundir.as_path(out) / "tables.md").read_text())
        print(f"written: {out}")
        return exit_codes.OK
    spec = from_flags(DataExponentSpec, {"root": root, "tokens": options.tokens, "largest_only": options.largest_only})
    sweep_commands = options.sweep_commands
    commands = rundir.as_path(sweep_commands).read_text().splitlines() if sweep_commands else []
    spec = dataclasses.replace(spec, sweep_commands=commands)  # the file's lines, not a flag's value
    with rundir.local_dir(out) as local_out:  # a gs:// OUT: written here, then copied up
        results = measure(spec, command=command)
        write_outputs(results, local_out)
    print((rundir.as_path(out) / "tables.md").read_text())
    print(f"written: {out} ({results.info['study_s']} s)")
    return exit_codes.OK


run_data_exponent.option_groups = {"options": DataExponentOptions}

"""`depthdelusion data-exponent-ridge RUN --out DIR`: the data exponent of ridge readouts on a
trained model's frozen features, against the one its spectrum predicts and against wrong spectra.

Features: the LM head's input h (the final norm's output) of the run's newest checkpoint over the
first held-out tokens of its validation split (float32 forward, as `depthdelusion spectrum`),
centred at their mean over that pool. The pool is the population: subsamples are drawn from it
with replacement, so they are i.i.d. and the population covariance is the pool's, exactly.

Target: y = θ*ᵀx + σε with θ* the trained head's readout of one token, centred as softmax allows
(w̃_v = w_v − Σ_u p_u w_u, p the next-token frequencies in the pool), for v the most frequent next
token (``target_rank`` = 2, 3, …: the next ones): the model's own centred logit of that token, a linear function of the features whose
smoothness s in the features' eigenbasis is the model's, not chosen by us. The noise ε ~ N(0, 1)
is ours (σ = ``noise`` × the standard deviation of θ*ᵀx), so the excess risk of a readout is
exact: (θ̂ − θ*)ᵀ Σ (θ̂ − θ*). This tests the law's claim about the spectrum and the target's
smoothness on real features; it does not test a language model's own training (the token-sweep
study, `depthdelusion data-exponent`, does that, without a spectrum-dependent control).

The procedure, the prediction and the verdict: depthdelusion/analysis/science/ridge_exponent.py.
Outputs in DIR: ridge.csv (one row), curves.csv (per n), ridge.md (tables, seeds, wall time,
the command). RUN and DIR may be local or gs://.

The study's shape: its spec (`RidgeSpec`, from the command's flags by `spec.from_flags`),
`measure` to a frozen `RidgeResults` (the table's row and the learning curve's rows), `sections`
to ridge.md; the CSVs written from the same results.
"""
from __future__ import annotations

import dataclasses
import math
import shlex
import time

import jax
import numpy as np
from flax import nnx

from depthdelusion import exit_codes, rundir
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.analysis.science import ridge_exponent
from depthdelusion.analysis.science.redundancy import power_law_spectrum, source_target
from depthdelusion.config import bounded
from depthdelusion.model.transformer import Taps
from depthdelusion.option_fields import command_words
from depthdelusion.studies.common import spectrum
from depthdelusion.studies.common.spec import from_flags, spec_error
from depthdelusion.studies.data_exponent.options import RidgeOptions

GROUPS = 8  # contiguous token groups: the rank range's halves and the jackknife
NOISE = RidgeOptions.noise  # σ over the signal's standard deviation
RIDGE_COLUMNS = (
    "run", "step", "width", "pool_tokens", "target_rank", "target_token", "noise", "n_min", "n_max", "n_points",
    "reps", "seed", "b_measured", "b_lo", "b_hi", "b_gcv", "b_gcv_lo", "b_gcv_hi", "beta", "beta_lo",
    "beta_hi", "decay", "s", "s_lo", "s_hi", "b_pred", "b_pred_lo", "b_pred_hi", "b_half_beta",
    "b_half_beta_lo", "b_half_beta_hi", "b_double_beta", "b_double_beta_lo", "b_double_beta_hi",
    "b_twin", "b_twin_lo", "b_twin_hi", "b_fs", "b_fs_lo", "b_fs_hi", "b_fs_half_beta", "b_fs_half_beta_lo",
    "b_fs_half_beta_hi", "b_fs_double_beta", "b_fs_double_beta_lo", "b_fs_double_beta_hi", "rank_lo", "rank_hi",
    "reg_at_grid_edge", "tolerance", "verdict", "verdict_finite_size", "wall_s")



@dataclasses.dataclass(frozen=True)
class RidgeSpec:
    """What `depthdelusion data-exponent-ridge RUN` measures (its flags, `spec.from_flags`)."""

    run: str
    tokens: int = bounded(RidgeOptions.tokens, ge=1)  # held-out tokens in the feature pool
    rows: int = bounded(RidgeOptions.rows, ge=1)  # sequences per forward pass
    n_min: int = bounded(RidgeOptions.n_min, ge=1)  # the n grid doubles from n_min up to n_max
    n_max: int = bounded(RidgeOptions.n_max, ge=1)
    reps: int = bounded(RidgeOptions.reps, ge=1)
    seed: int = bounded(RidgeOptions.seed, ge=0)
    noise: float = bounded(NOISE, gt=0)  # over the target signal's standard deviation
    target_rank: int = bounded(RidgeOptions.target_rank, ge=1)  # the k-th most frequent next token's readout

    def validate(self) -> None:
        if self.n_max < 4 * self.n_min:
            raise spec_error("n_max", self.n_max, f"must be at least 4 × --n-min ({4 * self.n_min}), for a slope")


@dataclasses.dataclass(frozen=True)
class RidgeResults:
    """What the readouts measured: ridge.csv's one row and curves.csv's rows (rendered by
    `sections`), and the command that reproduces them."""

    row: dict  # RIDGE_COLUMNS
    curves: tuple  # `curve_rows`
    command: str


def pool_features(run, tokens: int, rows: int) -> tuple:
    """(features (N, W) float64, next tokens (N,), head kernel (W, V), checkpoint step, config)."""
    cfg, step, graphdef, params = spectrum.load_run(run)
    batches = spectrum.validation_tokens(cfg, tokens, rows)

    @jax.jit
    def forward(params, tokens_BxS1):
        return nnx.merge(graphdef, params).forward(
            tokens_BxS1[:, :-1], Taps(head_input_fn=lambda h: h)).head_input

    width = cfg.model.width
    h = [np.asarray(jax.device_get(forward(params, b)), np.float64).reshape(-1, width) for b in batches]
    nxt = [np.asarray(b)[:, 1:].ravel() for b in batches]
    return (np.concatenate(h), np.concatenate(nxt), np.asarray(params["head_kernel"], np.float64),
            step, cfg)


def readout_target(head_WxV: np.ndarray, next_N: np.ndarray, rank: int = 1) -> tuple[np.ndarray, int]:
    """(θ* (W,), v): the centred head column of the ``rank``-th most frequent next token v."""
    counts = np.bincount(next_N, minlength=head_WxV.shape[1])[:head_WxV.shape[1]]
    if not 1 <= rank <= int(np.sum(counts > 0)):
        raise ValueError(f"--target-rank={rank}: must be in 1..{int(np.sum(counts > 0))} (the number of "
                         "distinct next tokens in the pool)")
    p_V = counts / counts.sum()
    v = int(np.argsort(-counts, kind="stable")[rank - 1])
    return head_WxV[:, v] - head_WxV @ p_V, v


def exponent_check(x_NxW: np.ndarray, theta_star_W: np.ndarray, *, ns, reps: int, seed: int,
                  noise: float = NOISE, groups: int = GROUPS) -> dict:
    """The measured exponent, the prediction and the verdict on a pool of features."""
    x_NxW = x_NxW - x_NxW.mean(axis=0)
    # trace 1: the λ grid is in units of the covariance's trace (the exponent is scale-free)
    scale = math.sqrt(float(np.sum(x_NxW ** 2)) / len(x_NxW))
    x_NxW, theta_star_W = x_NxW / scale, theta_star_W * scale
    cov_WxW = x_NxW.T @ x_NxW / len(x_NxW)
    sigma = noise * math.sqrt(float(theta_star_W @ cov_WxW @ theta_star_W))
    curves = ridge_exponent.learning_curves(
        lambda n, rng: x_NxW[rng.integers(len(x_NxW), size=n)], theta_star_W, cov_WxW, sigma, ns,
        reps=reps, seed=seed)
    measured = ridge_exponent.measured_exponent(curves, seed=seed)
    edges = np.linspace(0, len(x_NxW), groups + 1).astype(int)
    parts = [x_NxW[a:b] for a, b in zip(edges[:-1], edges[1:])]
    covs, counts = [p.T @ p / len(p) for p in parts], [len(p) for p in parts]
    prediction = ridge_exponent.spectral_prediction(covs, counts, theta_star_W)
    finite = ridge_exponent.finite_size_prediction(covs, counts, theta_star_W, noise, curves.ns)
    return {"curves": curves, "measured": measured, "prediction": prediction,
            "verdict": ridge_exponent.verdict(measured, prediction), "sigma": sigma,
            "finite": finite, "verdict_finite": ridge_exponent.verdict(measured, finite, tolerance=0.0),
            "twin": power_law_twin(prediction, len(theta_star_W), ns=ns, reps=reps, seed=seed,
                                   noise=noise)}


def power_law_twin(prediction, width: int, *, ns, reps: int, seed: int, noise: float):
    """The same procedure on Gaussian features with an exact power law λ_i = i^(−β) and a target
    of smoothness s (the measured β, s; analysis/science/redundancy.py's source_target), at the same
    width, n, replicates and noise ratio: what the measured exponent is at this finite width and
    n range when the law's assumptions hold exactly (None without a prediction)."""
    if not (math.isfinite(prediction.beta) and math.isfinite(prediction.s)):
        return None
    lam_W = power_law_spectrum(width, prediction.beta)
    lam_W = lam_W / lam_W.sum()
    theta_W = source_target(lam_W, prediction.s)
    sigma = noise * math.sqrt(float(np.sum(lam_W * theta_W ** 2)))
    curves = ridge_exponent.learning_curves(
        lambda n, rng: rng.standard_normal((n, width)) * np.sqrt(lam_W), theta_W, lam_W, sigma,
        ns, reps=reps, seed=seed)
    return ridge_exponent.measured_exponent(curves, seed=seed)


def _r(x, digits: int = 3):
    return "" if x is None or not math.isfinite(x) else round(float(x), digits)


def table_row(result: dict, info: dict) -> dict:
    m, p = result["measured"], result["prediction"]
    half, double = p.wrong[0.5], p.wrong[2.0]
    twin = result["twin"]
    twin_b, twin_ci = (twin.exponent, twin.ci) if twin is not None else (math.nan, (math.nan,) * 2)
    ns = result["curves"].ns
    values = {
        "b_measured": m.exponent, "b_lo": m.ci[0], "b_hi": m.ci[1], "b_gcv": m.gcv_exponent,
        "b_gcv_lo": m.gcv_ci[0], "b_gcv_hi": m.gcv_ci[1], "beta": p.beta, "beta_lo": p.beta_ci[0],
        "beta_hi": p.beta_ci[1], "decay": p.decay, "s": p.s, "s_lo": p.s_ci[0], "s_hi": p.s_ci[1],
        "b_pred": p.b, "b_pred_lo": p.b_ci[0], "b_pred_hi": p.b_ci[1], "b_half_beta": half[0],
        "b_half_beta_lo": half[1][0], "b_half_beta_hi": half[1][1], "b_double_beta": double[0],
        "b_double_beta_lo": double[1][0], "b_double_beta_hi": double[1][1], "b_twin": twin_b,
        "b_twin_lo": twin_ci[0], "b_twin_hi": twin_ci[1]}
    fs = result["finite"]
    for key, (b, ci) in (("b_fs", (fs.b, fs.b_ci)), ("b_fs_half_beta", fs.wrong[0.5]),
                         ("b_fs_double_beta", fs.wrong[2.0])):
        values.update({key: b, f"{key}_lo": ci[0], f"{key}_hi": ci[1]})
    return {**{k: info[k] for k in ("run", "step", "width", "pool_tokens", "target_rank", "target_token", "noise",
                                     "reps", "seed")},
            "n_min": int(ns[0]), "n_max": int(ns[-1]), "n_points": len(ns),
            **{k: _r(v) for k, v in values.items()},
            "rank_lo": p.rank_range[0] if p.rank_range else "",
            "rank_hi": p.rank_range[1] if p.rank_range else "",
            "reg_at_grid_edge": " ".join(str(n) for n in result["curves"].at_grid_edge()),
            "tolerance": ridge_exponent.TOLERANCE, "verdict": result["verdict"],
            "verdict_finite_size": result["verdict_finite"],
            "wall_s": info["wall_s"]}


def _ci(row, key, lo, hi) -> str:
    return "—" if row[key] == "" else f"{row[key]} [{row[lo]}, {row[hi]}]"


def sections(r: RidgeResults) -> str:
    """ridge.md: the setup, the verdicts' tables and the learning curve (formatting `r`)."""
    row, curves_rows, command = r.row, r.curves, r.command
    lines = [
        f"# Ridge readouts on frozen features: {row['run']}", "",
        f"Checkpoint step {row['step']}, W = {row['width']}; features: the LM head's input over "
        f"{row['pool_tokens']:,} held-out tokens (the pool, resampled with replacement); target: "
        f"the centred head readout of token {row['target_token']} (the "
        f"#{row['target_rank']} most frequent next token) plus Gaussian noise "
        f"(σ = {row['noise']} × the signal's sd); n = {row['n_min']} … {row['n_max']} "
        f"({row['n_points']} points), {row['reps']} replicates, seed {row['seed']}; "
        f"wall time {row['wall_s']} s.", "",
        "b measured: slope of log mean exact excess risk on log n, ridge λ tuned per n to the "
        "least mean risk (the law's optimal ridge); 95% percentile bootstrap over replicates. "
        "b (GCV λ): the same with each replicate's λ chosen by GCV on its own sample (reference; "
        "GCV is unreliable at n close to W, and one such point can dominate its slope). "
        "Prediction: β of the feature covariance's tail and the decay a = 1 + 2βs of the readout "
        "power λ_i(u_iᵀθ*)² over the stated ranks, b = (a − 1)/a; controls: β halved and doubled "
        "with s kept; jackknife 95% over 8 token groups. Verdict: a prediction is consistent "
        f"when its interval widened by ±{row['tolerance']} meets the measured one; 'agrees' = "
        "the measured spectrum's prediction consistent and both controls rejected. Power-law "
        "twin: the same procedure (same W, n, replicates, noise ratio, seed) on Gaussian features "
        "with an exact λ_i = i^(−β) and a target of smoothness s at the measured β, s: the "
        "exponent this finite width and n range give when the law's assumptions hold exactly.", "",
        markdown_table(["b measured [bootstrap]", "b (GCV λ) [bootstrap]", "β [jackknife]",
                        "s [jackknife]", "b predicted [jackknife]", "b with β/2", "b with 2β",
                        "b on the power-law twin [bootstrap]", "ranks", "verdict"],
                       [[_ci(row, "b_measured", "b_lo", "b_hi"), _ci(row, "b_gcv", "b_gcv_lo", "b_gcv_hi"),
                         _ci(row, "beta", "beta_lo", "beta_hi"), _ci(row, "s", "s_lo", "s_hi"),
                         _ci(row, "b_pred", "b_pred_lo", "b_pred_hi"),
                         _ci(row, "b_half_beta", "b_half_beta_lo", "b_half_beta_hi"),
                         _ci(row, "b_double_beta", "b_double_beta_lo", "b_double_beta_hi"),
                         _ci(row, "b_twin", "b_twin_lo", "b_twin_hi"),
                         f"{row['rank_lo']}–{row['rank_hi']}", row["verdict"]]]), "",
        "Finite-size prediction: the law's expected exponent for this design (the "
        "deterministic-equivalent ridge risk at the best λ per n over the same n, from the "
        "measured eigenpairs and the target's coefficients; `ridge_exponent.finite_size_exponent`), "
        "unbiased on synthetic features with no allowance; controls: the eigenvalues raised to "
        "the power ½ and 2 (tail exponent halved, doubled; unit trace, same target coefficients "
        "and noise ratio) through the same computation; jackknife 95% over 8 token groups; "
        "verdict with no allowance.", "",
        markdown_table(["b measured [bootstrap]", "b finite-size [jackknife]", "with β/2", "with 2β",
                        "verdict"],
                       [[_ci(row, "b_measured", "b_lo", "b_hi"), _ci(row, "b_fs", "b_fs_lo", "b_fs_hi"),
                         _ci(row, "b_fs_half_beta", "b_fs_half_beta_lo", "b_fs_half_beta_hi"),
                         _ci(row, "b_fs_double_beta", "b_fs_double_beta_lo", "b_fs_double_beta_hi"),
                         row["verdict_finite_size"]]]), "",
        "Learning curve (mean over replicates):", "",
        markdown_table(["n", "excess risk (tuned λ)", "tuned λ / tr Σ", "local slope",
                        "excess risk (GCV λ)"],
                       [[c["n"], c["risk_tuned"], c["reg_tuned"], c["local_slope"], c["risk_gcv"]]
                        for c in curves_rows]),
        "", "Tuned λ at the grid's edge at n = " + (row["reg_at_grid_edge"] or "none") + ".",
        "", f"Regenerate with `{command}`.", ""]
    return "\n".join(lines)


def curve_rows(curves) -> list[dict]:
    """Per n: the tuned mean risk, its λ (in units of the covariance's trace), the local slope
    from the previous n, and the mean risk at GCV-chosen λ."""
    risk_N, reg_N, gcv_N = curves.tuned(), curves.tuned_regs(), curves.gcv().mean(axis=0)
    rows = []
    for j, n in enumerate(curves.ns):
        local = ("" if j == 0 else round(-math.log(risk_N[j] / risk_N[j - 1])
                                          / math.log(n / curves.ns[j - 1]), 2))
        rows.append({"n": int(n), "risk_tuned": float(f"{risk_N[j]:.4g}"),
                     "reg_tuned": float(f"{reg_N[j]:.3g}"), "local_slope": local,
                     "risk_gcv": float(f"{gcv_N[j]:.4g}")})
    return rows


def n_grid(n_min: int, n_max: int) -> list[int]:
    """n_min, 2·n_min, … up to n_max."""
    return [int(n_min * 2 ** k) for k in range(int(math.log2(n_max / n_min)) + 1)]


def measure(spec: RidgeSpec, *, command: str = "") -> RidgeResults:
    """The pool of features, the readout target, the learning curves and the exponents."""
    start = time.perf_counter()
    x_NxW, next_N, head_WxV, step, cfg = pool_features(spec.run, spec.tokens, spec.rows)
    if len(x_NxW) < GROUPS * 2:
        raise ValueError(f"--tokens={spec.tokens}: the pool holds {len(x_NxW)} tokens; need at least "
                         f"{GROUPS * 2}")
    theta_W, v = readout_target(head_WxV, next_N, spec.target_rank)
    result = exponent_check(x_NxW, theta_W, ns=n_grid(spec.n_min, spec.n_max), reps=spec.reps,
                            seed=spec.seed, noise=spec.noise)
    info = {"run": rundir.as_path(spec.run).name, "step": step, "width": cfg.model.width,
            "pool_tokens": len(x_NxW), "target_token": v, "target_rank": spec.target_rank,
            "noise": spec.noise, "reps": spec.reps, "seed": spec.seed,
            "wall_s": round(time.perf_counter() - start, 1)}
    return RidgeResults(table_row(result, info), tuple(curve_rows(result["curves"])), command)


def run_command(*, run: str, out: str, options: RidgeOptions = RidgeOptions()) -> int:
    """`depthdelusion data-exponent-ridge` (the parser is `depthdelusion.cli`, from `RidgeOptions`)."""
    spec = from_flags(RidgeSpec, {"run": run, **dataclasses.asdict(options)})
    command = shlex.join(["depthdelusion", "data-exponent-ridge", str(run), "--out", str(out),
                          *command_words(options)])
    results = measure(spec, command=command)
    out_dir = rundir.as_path(out)  # local or gs:// (the CSV and markdown writers take either)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(out_dir / "ridge.csv", RIDGE_COLUMNS, [results.row])
    write_csv(out_dir / "curves.csv", list(results.curves[0]), results.curves)
    (out_dir / "ridge.md").write_text(sections(results))
    print((out_dir / "ridge.md").read_text())
    print(f"written: {out_dir}")
    return exit_codes.OK


run_command.option_groups = {"options": RidgeOptions}

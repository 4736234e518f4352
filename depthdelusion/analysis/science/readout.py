"""Source smoothness s of a language model's target, estimated from its LM head,
and the data exponent the redundancy law predicts from it. Numpy only; owns readout.csv.

Convention ("Scaling laws are redundancy laws"; depthdelusion/analysis/science/redundancy.py): features x with
covariance eigenpairs (λ_i, u_i), λ_i ∝ i^(−β); a linear target f(x) = θᵀx with θ_i = u_iᵀθ has
source smoothness s when its power per eigendirection decays as

    a_i² := λ_i θ_i² ∝ i^(−(1 + 2βs))        (the borderline source condition λ_i θ_i² = λ_i^(2s) / i)

a_i² is the variance of f along direction i (the squared coefficient of f on the i-th
L²-normalised eigenfunction). Kernel ridge then learns at rate n^(−b), b = 2βs / (2βs + 1).

Estimator. The features are the LM head's inputs h (the final norm's output) over held-out
tokens; the target readouts are the trained head's columns w_v (one linear function per
vocabulary entry, logit_v = w_vᵀh). Softmax ignores a shift of every w_v by the same vector, so the
columns are centred, w̃_v = w_v − Σ_u p_u w_u, and weighted by p_v, the frequency of v as the next
token in the same held-out tokens (columns of tokens that never occur carry no signal, only
their initialisation). Then

    a_i² = λ_i · Σ_v p_v (u_iᵀ w̃_v)²,

and a least-squares fit of log a_i² on log i over the ranks [lo, hi] of the tail fit of λ (the
rule of spectra.fit_range) gives the decay a = 1 + 2βs, so 2βs = a − 1, s = (a − 1) / (2β) and
the predicted exponent b = (a − 1) / a: under this source condition the prediction needs the
product βs only, which the readout's power decay measures directly (β and s separately are
reported, β from the same spectrum). With a ≤ 1 the readout's power decays no faster than 1/i:
s ≤ 0, outside the law (no prediction).

Interval: delete-one-group jackknife over the token groups (eigenbasis, λ and p recomputed from
the tokens left; the head fixed), t quantile, as for β. It covers the sampling of held-out
tokens only, not the training run (seed, schedule) that produced the head, and it is conditional
on the rank range.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from depthdelusion import rundir

from ..formats.table_text import write_csv
from .spectra import fit_tail_index

READOUT_COLUMNS = ("beta", "beta_lo", "beta_hi", "decay", "decay_lo", "decay_hi", "s", "s_lo",
                   "s_hi", "b_pred", "b_pred_lo", "b_pred_hi", "rank_lo", "rank_hi", "tokens")


def readout_power(eigvals_W: np.ndarray, eigvecs_WxW: np.ndarray, head_WxV: np.ndarray,
                  p_V: np.ndarray) -> np.ndarray:
    """a_i² (W,) = λ_i Σ_v p_v (u_iᵀ w̃_v)², eigenpairs sorted from the largest eigenvalue
    (eigvecs_WxW[:, i] = u_i), head_WxV the readout columns, p_V next-token frequencies."""
    p_V = np.asarray(p_V, float) / np.sum(p_V)
    centred_WxV = head_WxV - (head_WxV @ p_V)[:, None]
    proj_WxV = eigvecs_WxW.T @ centred_WxV
    return np.asarray(eigvals_W, float) * ((proj_WxV ** 2) @ p_V)


def decay_rate(power_W: np.ndarray, lo: int, hi: int) -> float:
    """a of power_i ∝ i^(−a) by least squares on log-log axes over ranks lo..hi (1-based)."""
    y = np.asarray(power_W, float)[lo - 1:hi]
    if len(y) < 2 or not np.all(y > 0):
        return math.nan
    return -float(np.polyfit(np.log(np.arange(lo, hi + 1, dtype=float)), np.log(y), 1)[0])


def implied(beta: float, decay: float) -> tuple[float, float]:
    """(s, predicted b) from the spectrum's β and the readout power's decay a = 1 + 2βs."""
    if not (math.isfinite(decay) and math.isfinite(beta)) or decay <= 1 or beta <= 0:
        return math.nan, math.nan
    return (decay - 1) / (2 * beta), (decay - 1) / decay


@dataclass
class SourceFit:
    beta: float
    beta_ci: tuple
    decay: float
    decay_ci: tuple
    s: float
    s_ci: tuple
    b_pred: float
    b_pred_ci: tuple
    rank_range: tuple | None
    tokens: int
    power: np.ndarray  # a_i² over all ranks (all tokens)

    def row(self) -> list:
        lo, hi = self.rank_range or ("", "")
        vals = [self.beta, *self.beta_ci, self.decay, *self.decay_ci, self.s, *self.s_ci,
                self.b_pred, *self.b_pred_ci]
        return [_r(v) for v in vals] + [lo, hi, self.tokens]


def _r(x, digits: int = 3):
    return "" if x is None or not math.isfinite(x) else round(float(x), digits)


def jackknife_ci(estimate: float, leave_one_out) -> tuple[float, float]:
    """estimate ± t(0.975, G − 1)·SE, SE the delete-one-group jackknife's."""
    from scipy import stats

    jack = np.asarray(leave_one_out, float)
    g = len(jack)
    if not math.isfinite(estimate) or g < 2 or not np.all(np.isfinite(jack)):
        return math.nan, math.nan
    se = math.sqrt((g - 1) / g * float(np.sum((jack - jack.mean()) ** 2)))
    half = float(stats.t.ppf(0.975, g - 1)) * se
    return estimate - half, estimate + half


def source_fit(full: tuple, leave_one_out: list[tuple], head_WxV: np.ndarray, rank_range,
               beta: float, beta_ci: tuple, tokens: int) -> SourceFit:
    """The estimate from (eigvals, eigvecs, p_V) of all tokens and of each delete-one-group
    subset, over ``rank_range`` (the tail fit's; None: no fit)."""
    power = readout_power(*full[:2], head_WxV, full[2])
    if rank_range is None:
        nan2 = (math.nan, math.nan)
        return SourceFit(beta, beta_ci, math.nan, nan2, math.nan, nan2, math.nan, nan2, None,
                         tokens, power)

    lo, hi = rank_range
    decay = decay_rate(power, lo, hi)
    s, b_pred = implied(beta, decay)
    jack = []
    for eigvals, eigvecs, p in leave_one_out:
        d = decay_rate(readout_power(eigvals, eigvecs, head_WxV, p), lo, hi)
        jack.append((d, *implied(fit_tail_index(eigvals, lo, hi), d)))
    d_j, s_j, b_j = (list(col) for col in zip(*jack))
    return SourceFit(beta, beta_ci, decay, jackknife_ci(decay, d_j), s, jackknife_ci(s, s_j),
                     b_pred, jackknife_ci(b_pred, b_j), rank_range, tokens, power)


def write_readout_csv(fit: SourceFit, path: Path) -> Path:
    return write_csv(path, READOUT_COLUMNS, [fit.row()])


def read_readout_csv(path: Path) -> dict:
    """The one row of a readout.csv as floats (None for an empty cell); a clear error naming the
    file otherwise."""
    with io.StringIO(rundir.as_path(path).read_text(encoding="utf-8"), newline="") as fh:
        reader = csv.DictReader(fh)
        missing = set(READOUT_COLUMNS) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: not a readout.csv from `depthdelusion data-exponent` "
                             f"(missing columns: {', '.join(sorted(missing))})")
        rows = list(reader)
    if len(rows) != 1:
        raise ValueError(f"{path}: expected one row, found {len(rows)}")
    try:
        return {k: float(v) if v not in ("", None) else None for k, v in rows[0].items()
                if k in READOUT_COLUMNS}
    except ValueError:
        raise ValueError(f"{path} line 2: a value is not a number") from None


def readout_tables(root) -> list[tuple[str, dict]]:
    """Every RUN/spectrum/readout.csv below ``root`` (written by `depthdelusion data-exponent`),
    read: (run name, its row) pairs; none when there is none."""
    if not root or not rundir.as_path(root).is_dir():
        return []
    root = rundir.as_path(root)
    return [(path.parent.parent.relative_to(root).as_posix() if path.parent.parent != root else root.name,
             read_readout_csv(path)) for path in rundir.files_below(root, "spectrum/readout.csv")]
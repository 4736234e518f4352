"""Fit a registered law to runs: bounded least squares or Huber, multi-start, with intervals.

``fit(runs, law)`` minimises the squared loss residuals (nats) — or, with ``method="huber"``,
a Huber loss (threshold 1e-3) of log-loss residuals, the Chinchilla / Epoch AI practice — by a
bounded Levenberg–Marquardt (:mod:`.solver`) from a set of starting points, scale parameters
in log space, every parameter inside its physical bounds (exponents ≥ 0, κ ≥ 0, E ≥ 0,
scales > 0). Every parameter gets three 95% intervals, each named by its method: Jacobian
(log space for scales), profile likelihood (:mod:`.profile`) and a seeded case bootstrap
whose refits start from the optimum and from the best points of the multi-start (so that a
resample whose optimum moved to another basin can reach it). Leave-one-out refits start
from the same cold points. Runs are weighted equally. ``group_offsets=True`` fits one
offset E per group with the law's other parameters shared.

``fit`` gathers its keywords into a :class:`.options.FitOptions` and hands it whole to
:func:`fit_with`, which commands and the report call with the user's options; each stage takes
the problem, the options and the frozen part the stages before it produced (the search; the
optimum, in a ``FitSoFar``), and returns a frozen part (the search, the optimum with its
Jacobian and profiles, the resampling) holding the notes it adds; :func:`_fit_result` builds
the ``FitResult`` from them, once, the notes joined in the order the stages ran.

Cost is linear in the number of rows n: no n × n matrix is formed. On large tables the stages
whose cost is (number of refits) × n switch to stated approximations (thresholds below): the
multi-start runs on a seeded subsample and its best optima are polished on every row; the
bootstrap takes one Gauss–Newton step per resample from the optimum; leave-one-out errors come
from the hat-matrix diagonal of the Jacobian's thin QR; profile intervals are computed on
request (``FitResult.conf_int(method="profile")``) rather than by default.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ...progress import SILENT
from ..laws import get_law
from ..laws import signed_penalty as signed_penalty_law
from ..table.law_columns import check_law_columns
from ..table.load import load_runs
from ..table.runs import Runs
from .diagnostics import pooled_group_flag, pooled_groups, row_diagnostics
from .options import BOOTSTRAP, OUTLIER_Z, SEED, FitOptions, engine_method, loss_of_method
from .problem import RIDGE_TIE
from .replicates import replicate_cells
from .resampling import (
    BOOT_REFIT_ROWS,
    LOO_REFIT_ROWS,
    Bootstrap,
    FitSoFar,
    LeaveOneOut,
    bootstrap_stage,
    loo_stage,
)
from .result import FitResult
from .search import run_search
from .setup import FitSetup
from .uncertainty import PROFILE_ROWS, Optimum, at_bound, identifiability_flags, optimum_and_profiles

def fit(runs, law, method: str = "lm", *, bootstrap: int = BOOTSTRAP, seed: int = SEED,
        fixed: dict | None = None, grid_points: int | None = None, max_starts: int | None = None,
        leave_one_out: bool | str | None = None, profile: bool | None = None,
        group_offsets: bool = False, groups=None, refit_starts: int | None = None,
        bootstrap_refit: bool | None = None, overestimate_weight: float | None = None,
        diagnostics: bool | None = None, outlier_threshold: float = OUTLIER_Z,
        search: str | None = None, clusters=None, progress=SILENT, signed_penalty: bool = False,
        cluster_name: str | None = None, loss: str | None = None) -> FitResult:
    """Fit ``law`` (a registered name or Law) to ``runs`` (anything :func:`load_runs` takes).

    ``loss`` (as ``--loss`` names it; ``method``, the engine's older name, still works): ``"ls"``
    (``method="lm"``: least squares on loss residuals) or ``"huber"`` (Huber on log-loss
    residuals) or ``"asymmetric"`` (squared loss residuals, an overestimate weighted
    ``overestimate_weight``, default ``problem.OVERESTIMATE_WEIGHT``: the 1/(1+w) expectile, a
    lower envelope rather than the mean), all minimised by bounded Levenberg–Marquardt.

    ``search``: how the global optimum is found. ``"varpro"`` (:mod:`.varpro`): the parameters
    the law is linear in (Chinchilla's E, A, B) are solved by NNLS for each point of a grid over
    the others, and the grid's best local minima are polished on every row — exact for least
    squares, the start generator for Huber. ``"multistart"``: scale parameters in log space
    from a grid of ``grid_points`` per parameter (at most ``max_starts`` starts), every start
    solved (defaults 3 and 64). ``None``: the multi-start when ``grid_points`` or ``max_starts``
    is given, else variable projection where the law has linear parameters and at most
    ``varpro.AUTO_NONLINEAR`` nonlinear ones (and no group offsets), the multi-start otherwise;
    the best optimum is kept and every other local optimum reported.

    ``bootstrap`` case-resampling refits (seeded by ``seed``) each start from the optimum and
    the ``refit_starts`` best starts (default ``search.REFIT_STARTS``) (the best start of each distinct local optimum first;
    ``ONE_BASIN_REFIT_STARTS`` of them where the search found one optimum within ``COMPETING``
    times the best objective); a refit still at the iteration cap after a restart is left out and
    counted. Leave-one-out refits start from the first ``LOO_STARTS`` cold starts. ``profile`` computes profile-likelihood intervals for every free
    parameter: ``"full"`` (True) by the grid walk of :mod:`.profile`, ``"fast"`` by root-finding
    (:mod:`.profile_roots`), ``"none"`` (False) not at all. ``fixed`` pins parameters to given values; ``signed_penalty`` frees the depth
    penalty λ in sign (:func:`..laws.signed_penalty`). ``group_offsets=True`` fits one offset
    E per group (``groups``: labels per run, default ``runs.group``); the bootstrap then
    resamples within groups; ``clusters`` (a label per row, one per training run) resamples whole
    runs (a cluster bootstrap), ``cluster_name`` naming them in ``bootstrap_scheme`` (e.g.
    ``"run"``, ``"shape"``; ``"row"`` with no clusters: the case bootstrap, named). Token parameters of a law are dropped (absorbed into E) unless
    every run has a token count and they vary.

    Sizes (``None`` = by the number of rows n): ``leave_one_out`` ``"refit"`` (True) refits
    every held-out fit, ``"hat"`` uses the hat-matrix deletion formula, False skips it; by
    default refits when n ≤ ``LOO_REFIT_ROWS`` and ``bootstrap`` > 0, the hat matrix otherwise
    (``bootstrap=0`` thus makes no refit beyond the search). ``profile`` defaults to
    n ≤ ``PROFILE_ROWS`` (``FitResult.conf_int(method="profile")`` computes it later).
    ``bootstrap_refit`` defaults to n ≤ ``BOOT_REFIT_ROWS``; beyond, one Gauss–Newton step per
    resample from the optimum.

    ``diagnostics`` (:mod:`.diagnostics`): each row's residual, robust z, leverage and Cook's
    distance, the rows with |robust z| > ``outlier_threshold`` and the fit refitted without
    them (``result.diagnostics``); by default computed unless the fit is bare (bootstrap=0,
    profile=False, leave_one_out=False). Text columns the fit pooled are always flagged.

    ``progress``: a ``depthdelusion.progress.Stages`` told as each stage starts (default silent)."""
    options = FitOptions(
        loss=loss_of_method(engine_method(loss, method)), bootstrap=bootstrap, seed=seed,
        search=search, starts=max_starts, grid_points=grid_points,
        overestimate_weight=overestimate_weight, outlier_threshold=outlier_threshold,
        fix=dict(fixed) if fixed else None, signed_penalty=signed_penalty, profile=profile,
        leave_one_out=leave_one_out, bootstrap_refit=bootstrap_refit, refit_starts=refit_starts,
        diagnostics=diagnostics)
    return fit_with(runs, law, options, group_offsets=group_offsets, groups=groups,
                    clusters=clusters, cluster_name=cluster_name, progress=progress)


def fit_with(runs, law, options: FitOptions, *, group_offsets: bool = False, groups=None,
             clusters=None, cluster_name: str | None = None, progress=SILENT) -> FitResult:
    """:func:`fit` with its options whole (``options.cluster``, a column name, is the caller's
    to turn into ``clusters``: :func:`.clusters.cluster_kwargs`); the other arguments are the
    table's: group offsets and labels, the bootstrap's clusters, and the progress display."""
    law, runs = (signed_penalty_law(law) if options.signed_penalty else get_law(law)), load_runs(runs)
    check_law_columns(law, runs)
    setup = FitSetup(runs, law, options, group_offsets=group_offsets, groups=groups, notes=_first_notes(runs))
    problem = setup.problem
    options, sizing_notes = _with_stage_sizes(options, len(problem.y))
    stage = _stages(progress, law, len(problem.y), options)
    stage("search")
    found = run_search(problem, options)
    stage("profile intervals" if options.profile else "")
    optimum = optimum_and_profiles(problem, options, found)  # its search: a profile may have gone lower
    so_far = FitSoFar(optimum, setup.strata, clusters, cluster_name)
    stage(f"bootstrap ({options.bootstrap} resamples)" if options.bootstrap else "")
    boot = bootstrap_stage(problem, options, so_far)
    stage(f"leave-one-out ({options.leave_one_out})" if options.leave_one_out else "")
    loo = loo_stage(problem, options, so_far)
    stage("row diagnostics" if options.diagnostics else "")
    return _fit_result(problem, setup, runs, options, _Parts(sizing_notes, optimum, boot, loo),
                       offsets_by_group_column=groups is None)


@dataclass(frozen=True)
class _Parts:
    """The stages' frozen parts: the notes of sizing the stages (:func:`_with_stage_sizes`), the
    optimum with its search, the bootstrap and the leave-one-out errors."""

    sizing_notes: tuple
    optimum: Optimum
    boot: Bootstrap
    loo: LeaveOneOut


def _first_notes(runs) -> list[str]:
    """The runs' own notes, then the replicate cells found (unless a reduction already said so)."""
    notes = list(runs.notes)
    if not any(n.startswith("replicates reduced") for n in notes):
        replicates = replicate_cells(runs)
        if replicates.cells:
            notes.append(replicates.describe(runs))
    return notes


def _stages(progress, law, n, options: FitOptions):
    """``stage(text)``: tells ``progress`` that the stage ``text`` starts ("" : a stage this
    fit skips), having first announced how many there are."""
    progress.expect(1 + sum(map(bool, (options.profile, options.bootstrap, options.leave_one_out,
                                       options.diagnostics))))
    return lambda text: progress.stage(f"{law.name}, {n:,} rows: {text}") if text else None


def _with_stage_sizes(options: FitOptions, n: int) -> tuple[FitOptions, tuple]:
    """(``options`` with the sizes of the interval stages defaulted by the number of rows n:
    ``leave_one_out`` ``"refit"``/``"hat"``/False, ``profile`` ``"full"``/``"fast"``/False,
    ``bootstrap_refit`` and ``diagnostics`` True/False; the notes saying a profile skipped)."""
    leave_one_out, profile, bootstrap_refit = options.leave_one_out, options.profile, options.bootstrap_refit
    notes = []
    if leave_one_out is None:
        leave_one_out = "refit" if n <= LOO_REFIT_ROWS and options.bootstrap else "hat"
    elif leave_one_out is True:
        leave_one_out = "refit"
    if profile is None:
        profile = "full" if n <= PROFILE_ROWS else False
        if not profile:
            notes.append(f"profile intervals not computed by default above {PROFILE_ROWS} rows "
                         "(each profile point refits every row); conf_int(method='profile') "
                         "computes them")
    elif profile == "none":
        profile = False
        notes.append("profile intervals skipped (profile 'none'): each parameter's intervals are "
                     "the Jacobian's and the bootstrap's, named in their columns; an open profile "
                     "no longer marks a parameter n.i., so read a kink parameter's bootstrap "
                     "interval before its value")
    elif profile is True:
        profile = "full"
    if bootstrap_refit is None:
        bootstrap_refit = n <= BOOT_REFIT_ROWS
    diagnostics = options.diagnostics
    if diagnostics is None:
        diagnostics = bool(options.bootstrap or profile or leave_one_out)
    return dataclasses.replace(options, leave_one_out=leave_one_out, profile=profile,
                               bootstrap_refit=bootstrap_refit, diagnostics=diagnostics), tuple(notes)


def _fit_result(problem, setup, runs, options: FitOptions, parts: _Parts, *,
                offsets_by_group_column) -> FitResult:
    """The FitResult of the optimum with its statistics, intervals, flags and row diagnostics,
    built here and nowhere else (``parts``: the stages' frozen parts). Its loss statistics (RSS,
    R², AIC, ...) are views it computes from the fields. The flags and the row diagnostics read
    the fit's own parameter status, so they are computed on the result without them and added by
    ``dataclasses.replace``."""
    optimum, boot, loo = parts.optimum, parts.boot, parts.loo
    search = optimum.search
    # the notes in the order the stages ran: the runs' and the setup's, the stage sizes', the
    # search's (kept on it through a profile's restart), the profiles', the resamplings', then
    # the objective's
    notes = (*setup.notes, *parts.sizing_notes, *search.notes, *optimum.notes, *boot.notes, *loo.notes,
             *_method_notes(problem, options.method))
    y, n, theta, jac = problem.y, len(problem.y), optimum.theta, optimum.jac
    values = problem.values(theta)
    user_fixed = list(options.fixed_values())  # checked against their bounds, as the free ones are
    bare = FitResult(
        law=problem.law, method=problem.method, params={nm: values[nm] for nm in problem.names},
        fixed=setup.fixed, stderr=jac.stderr, ci_jacobian=jac.ci, ci_bootstrap=boot.ci,
        bootstrap_params=boot.samples, n_bootstrap_failed=boot.n_failed,
        n_bootstrap_not_converged=boot.n_capped, correlation=jac.corr,
        condition_number=jac.cond, n=n, k=problem.k,
        loo_residuals=loo.errors if loo.errors is not None else np.full(n, np.nan), observed=y.copy(),
        predicted=problem.predict(theta), starts=search.summary,
        run_names=list(runs.name), notes=notes, source=runs.source, seed=options.seed,
        jacobian_log=[p.name for p in problem.free if p.log],
        bounds={p.name: tuple(p.bounds) for p in problem.free},
        ridge_solutions=search.ridge_solutions, tie_tolerance=RIDGE_TIE, offset_groups=setup.offset_groups,
        bootstrap_scheme=boot.scheme, search=search.describe, options=options,
        at_bound=at_bound(problem, theta, fixed=user_fixed, vanished=jac.vanished,
                          ridge=[nm for nm in jac.ridge if nm not in (optimum.ci_profile or {})]),
        theta=np.array(theta, float), se_theta=np.array(jac.se_theta, float),
        ci_profile=optimum.ci_profile, profiles=optimum.profiles,
        profile_statistic=optimum.profile_statistic, profile_source=optimum.later,
        column_readings=dict(runs.read_as), selection=dict(runs.selection))
    pooled = pooled_groups(runs, bare.residuals, offset_column="group" if setup.offset_groups is not None
                           and offsets_by_group_column else None)
    flags = (jac.flags + identifiability_flags(bare, problem)
             + _pooling_flags(runs, setup.labels, problem.law, setup.token_term, setup.offset_groups)
             + [pooled_group_flag(p) for p in pooled])
    diagnostics = (row_diagnostics(problem, theta, jac.J, names=bare.run_names, stderr=bare.stderr,
                                   cold_starts=search.cold_starts, threshold=options.outlier_threshold,
                                   status=bare.status) if options.diagnostics else None)
    return dataclasses.replace(bare, flags=tuple(flags), pooled_groups=pooled, diagnostics=diagnostics)


def _method_notes(problem, method) -> list[str]:
    notes = []
    if problem.broadcasts is False:
        notes.append(f"law {problem.law.name!r} does not broadcast over arrays of parameters, so "
                     "every start and refit was evaluated one parameter vector at a time "
                     "(slow); write it with numpy operations to batch them")
    if method == "asymmetric":
        notes.append("Jacobian intervals of an asymmetric fit treat it as least squares: "
                     "approximate; prefer the profile or bootstrap ones")
    if method == "huber":  # (row diagnostics add flags, not notes: the notes' order is kept)
        notes.append("Jacobian intervals of a Huber fit treat it as least squares on "
                     "log-loss residuals: approximate; prefer the profile or bootstrap ones")
    return notes


def _pooling_flags(runs: Runs, labels, law, token_term: bool, offset_groups) -> list[str]:
    """A pooled fit over groups trained on different token budgets, by a law without a token
    term and without group offsets, credits the budget gap to the other terms."""
    groups = sorted(set(labels), key=str)
    if len(groups) < 2 or token_term or offset_groups is not None:
        return []
    budgets = {}
    for g in groups:
        t = runs.tokens[labels == g]
        t = t[np.isfinite(t)]
        budgets[g] = None if not len(t) else float(np.median(t))
    known = [b for b in budgets.values() if b is not None]
    if not known:
        return []  # nothing says the budgets differ
    differ = len(known) < len(budgets) or max(known) > 1.01 * min(known)
    if not differ:
        return []
    desc = "; ".join(f"{g}: {'unknown' if b is None else f'{b:.3g}'}" for g, b in budgets.items())
    return [f"pooled over groups whose token budgets differ or are unknown ({desc} tokens) by a "
            f"law without a token term ({law.name}) and without group offsets: a loss gap "
            "between the groups is credited to the other terms; fit with group_offsets=True, "
            "per group, or with a token term"]

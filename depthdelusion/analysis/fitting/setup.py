"""A fit's problem from the runs: fixed and dropped parameters (an unvarying token term is
absorbed into E), group offsets, the objective, and the notes saying so (``FitSetup``); the fit
options as they apply to one law (``options_for_law``, ``check_fixed``)."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..law_types import LawInputs
from ..laws import get_law
from .options import FitOptions
from .problem import OFFSET, Problem


class FitSetup:
    """The fit's problem from the runs under ``options`` (the objective, the fixed parameters):
    fixed and dropped parameters, group offsets, notes (``notes``: the first ones, default the
    runs' own)."""

    def __init__(self, runs, law, options: FitOptions, *, group_offsets: bool = False, groups=None,
                 notes=None):
        fixed, method = options.fixed_values(), options.method
        self.notes = notes = list(runs.notes if notes is None else notes)
        for name, value in fixed.items():
            b0, b1 = law.param(name).bounds  # raises for unknown names
            if not b0 <= value <= b1:  # a value past a bound is not "at" it: refuse, not flag
                raise ValueError(f"--fix {name}={value:g}: outside {name}'s allowed range [{b0:g}, {b1:g}] "
                                 f"in law {law.name!r}" + ("; --signed-penalty frees λ's sign"
                                                          if name == law.penalty else ""))
        if law.needs_tokens and not runs.tokens_vary:
            raise ValueError(f"law {law.name!r} needs per-run token counts that vary; these runs have "
                             f"{_describe_tokens(runs)}. Use a law without a data term (e.g. 'kaplan')")
        self.token_term = law.needs_tokens
        if law.token_params:
            if runs.tokens_vary:
                self.token_term = True
                notes.append("token term B·T^−β included: token counts vary across runs")
            else:
                for k, v in law.token_params.items():
                    fixed.setdefault(k, v)
                notes.append(f"token term dropped (absorbed into E): tokens {_describe_tokens(runs)}")
        self.fixed = fixed
        self.labels = np.asarray(runs.group if groups is None else groups, dtype=object)
        self._offsets(law, runs, group_offsets)
        self.problem = Problem(law, fixed, LawInputs.from_runs(runs), runs.loss, method,
                               self.offset_groups, self.gidx, options.overestimate_weight)
        self.problem.run_names = list(runs.name)
        if self.problem.overestimate_weight is not None:
            w = self.problem.overestimate_weight
            notes.append(f"asymmetric loss: an overestimate (prediction above the loss) weighs {w:g}× an "
                         f"underestimate, so the fit is the {1 / (1 + w):.3g} expectile of the loss — "
                         "near the lower envelope of the runs, not their mean (for small runs that "
                         "were under-tuned); RMSE, R² and AIC are of this fit's residuals")
        self.notes = tuple(notes)  # complete: the stages' notes are their own, joined after these
        n, k = len(runs), self.problem.k
        if n <= k + 1:
            raise ValueError(f"law {law.name!r} has {k} free parameters; fitting it needs more than "
                             f"{k + 1} runs, got {n}")

    @property
    def strata(self):
        """Each row's group index where the fit has group offsets (the bootstrap resamples
        within groups), else None."""
        return self.gidx if self.offset_groups is not None else None

    def _offsets(self, law, runs, group_offsets):
        labels, fixed = self.labels, self.fixed
        if len(labels) != len(runs):
            raise ValueError(f"groups has {len(labels)} labels for {len(runs)} runs")
        self.offset_groups, self.gidx = None, None
        if not group_offsets:
            return
        if OFFSET not in law.param_names or OFFSET in fixed:
            raise ValueError(f"group offsets need a free additive offset {OFFSET!r}; law {law.name!r} "
                             f"has parameters {law.param_names}" + (" (E is fixed)" if OFFSET in fixed else ""))
        self.offset_groups = sorted(set(labels), key=str)
        self.gidx = np.array([self.offset_groups.index(g) for g in labels])
        self.notes.append(f"one offset E per group ({', '.join(f'{g}: {int((labels == g).sum())} runs' for g in self.offset_groups)}); "
                          "the other parameters are shared")


def options_for_law(options: FitOptions, law) -> FitOptions:
    """``options`` for one of several laws fitted alike (a report): only the fixed parameters
    ``law`` has, and the signed penalty only where it has λ."""
    law = get_law(law)
    fixed = {k: v for k, v in options.fixed_values().items() if k in law.param_names}
    return dataclasses.replace(options, fix=fixed or None,
                               signed_penalty=options.signed_penalty and bool(law.penalty))


def check_fixed(options: FitOptions, laws) -> None:
    """Every ``--fix`` item of ``options`` is NAME=number with NAME a parameter of one of ``laws``
    (names or Laws), else a one-line error naming the flag and their parameters. Called before
    the fits (the laws are known only then)."""
    laws = [get_law(law) for law in laws]
    known = list(dict.fromkeys(p for law in laws for p in law.param_names))
    which = f"law {laws[0].name!r}" if len(laws) == 1 else f"laws {', '.join(w.name for w in laws)}"
    listed = f"; parameters of {which}: {', '.join(known)}"
    try:
        values = options.fixed_values()
    except ValueError as err:
        raise ValueError(f"{err}{listed}") from None
    fix = options.fix
    for item, name in zip([fix] if isinstance(fix, str) else fix or (), values):
        if name not in known:
            raise ValueError(f"--fix {item}: no parameter {name!r}{listed}")


def _describe_tokens(runs) -> str:
    """How the runs' (a ``Runs`` table's) token counts do not vary, in words."""
    t = runs.tokens
    known = np.isfinite(t)
    if not known.any():
        return "unknown for every run"
    if not known.all():
        rest = f" (the others constant at {t[known][0]:.3g})" if np.ptp(t[known]) == 0 else ""
        return f"unknown for {int((~known).sum())} of {len(t)} runs{rest}"
    return f"constant at {t[0]:.3g}"

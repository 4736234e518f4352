"""``search.scan_breaks`` on a large table: the kink held at each run's break costs a held fit per
break and origin, so the breaks are capped at ``MAX_BREAKS`` (evenly spaced in rank) and, above
``SEARCH_ROWS`` rows, held on the multi-start's subsample; the fit still lands at the true break."""
import numpy as np

from depthdelusion.analysis import fit
from depthdelusion.analysis.fitting.breaks import MAX_BREAKS, break_values
from depthdelusion.analysis.fitting.starts import SEARCH_ROWS
from depthdelusion.analysis.laws import LawInputs, get_law
from depthdelusion.analysis.table.runs import Runs


def test_the_breaks_are_capped_at_evenly_spaced_ranks_keeping_both_ends():
    runs_n = np.geomspace(1e6, 1e10, 300)
    breaks = np.repeat(runs_n, 3)  # 300 runs, 3 rows each
    values, total = break_values(breaks, (runs_n[0], np.inf), log=True)
    assert total == 299  # the smallest is on the bound, outside the open interval
    assert len(values) == MAX_BREAKS and np.all(np.diff(values) > 0)
    inside = np.log(runs_n[1:])
    assert values[0] == inside[0] and values[-1] == inside[-1]
    few, total = break_values(breaks[:30], (0, np.inf), log=False)
    assert total == 10 and len(few) == 10  # under the cap: every break, on the parameter's scale


def test_a_size_break_in_a_table_of_many_runs_and_rows_is_found_at_its_run():
    rng = np.random.default_rng(3)
    runs_n = np.geomspace(2e7, 4e9, 200)  # 200 runs (distinct N), 30 checkpoints each: 6,000 rows
    D = np.repeat(rng.choice([4, 8, 16, 32], len(runs_n)), 30).astype(float)
    N = np.repeat(runs_n, 30)
    W = np.sqrt(N / (12 * D))
    n_c = runs_n[120]
    truth = {"A": 30.0, "alpha": 0.15, "lam": 0.08, "N_c": n_c, "E": 1.5}
    loss = get_law("size_kink")(LawInputs.of(D, W, N), **truth) + 0.003 * rng.standard_normal(len(N))
    n = len(N)
    assert n > SEARCH_ROWS
    runs = Runs(D, W, N, loss, np.full(n, np.nan), np.full(n, np.nan), ["g"] * n,
                [f"r{i // 30}" for i in range(n)])
    result = fit(runs, "size_kink", bootstrap=0, leave_one_out=False, profile="none")
    assert abs(np.log(result.params["N_c"] / n_c)) < np.log(runs_n[1] / runs_n[0]) * 3


class _Recorder:
    """A problem whose solve records the starts, held columns and losses it is given."""

    def solve(self, starts, frozen_MxK=None, losses_MxN=None):
        self.starts, self.frozen, self.losses = starts, frozen_MxK, losses_MxN
        return "result"


def test_the_search_and_the_profile_hold_the_kink_at_each_break_the_same_way():
    """``held_at_breaks``, which the search, the profile and the replicate refits call: each
    origin with the kink at each break in turn, origin by origin, the kink held and the columns
    asked for held too, and each origin's own losses (a replicate's) with each of its fits."""
    from depthdelusion.analysis.fitting.breaks import held_at_breaks

    origins = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    problem = _Recorder()
    result, frozen = held_at_breaks(problem, origins, 1, np.array([10.0, 20.0]),
                                    np.array([[True, False, False], [False, False, True]]))
    assert result == "result" and frozen is problem.frozen
    assert problem.starts.tolist() == [[1, 10, 3], [1, 20, 3], [4, 10, 6], [4, 20, 6]]
    assert problem.frozen.tolist() == [[True, True, False]] * 2 + [[False, True, True]] * 2
    assert problem.losses is None
    held_at_breaks(problem, origins, 1, np.array([10.0, 20.0]), losses=np.array([[0.5, 0.6], [0.7, 0.8]]))
    assert problem.losses.tolist() == [[0.5, 0.6]] * 2 + [[0.7, 0.8]] * 2
    held_at_breaks(problem, origins, 0, np.array([7.0]))
    assert problem.starts.tolist() == [[7, 2, 3], [7, 5, 6]]
    assert problem.frozen.tolist() == [[True, False, False]] * 2


def test_a_profile_jump_at_a_break_the_search_s_cap_skips_is_still_at_a_break():
    """The profile's rule that a kink location's jump at a row's break is an end looks at every
    break, not the search's ``MAX_BREAKS`` evenly spaced ones: a jump may cross any of them."""
    from depthdelusion.analysis.fitting.breaks import kink_breaks
    from depthdelusion.analysis.fitting.problem import Problem
    from depthdelusion.analysis.fitting.profile import _at_a_break

    runs_n = np.geomspace(2e7, 4e9, 200)  # 200 distinct breaks, over the cap
    D = np.full(200, 8.0)
    W = np.sqrt(runs_n / (12 * D))
    x = LawInputs.of(D, W, runs_n)
    problem = Problem(get_law("size_kink"), {}, x, np.full(200, 3.0), "lm")
    j, capped, total = kink_breaks(problem)
    assert problem.names[j] == "N_c" and total == 200 and len(capped) == MAX_BREAKS
    skipped = next(v for v in np.log(runs_n) if not np.isclose(capped, v).any())
    step = np.log(runs_n[1] / runs_n[0])
    assert _at_a_break(problem, j, skipped - step / 4, skipped + step / 4)
    assert not _at_a_break(problem, j, skipped + step / 4, skipped + step / 2)
    assert not _at_a_break(problem, 0, skipped - step / 4, skipped + step / 4)  # not the kink

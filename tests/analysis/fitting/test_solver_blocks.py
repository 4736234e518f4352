"""Large problems: the solver sums its normal equations over blocks of rows, so memory per row
stays a few numbers, and reaches the optimum the dense path reaches; problems of at most one
block keep the dense path (the arithmetic every committed result was made with). Laws evaluated
at a Jacobian's points give every point the bits it gets alone."""
import tracemalloc

import numpy as np
import pytest

from depthdelusion.analysis import get_law
from depthdelusion.analysis.fitting import solver
from depthdelusion.analysis.fitting.problem import Problem
from depthdelusion.analysis.laws import LawInputs

from .test_fit_scale import epoch_rows

START = np.array([np.log(400.0), 0.3, np.log(1500.0), 0.3, np.log(1.7)])


def problem_of(n, method, groups=1):
    runs = epoch_rows(n, seed=4, groups=groups)
    labels = sorted(set(runs.group)) if groups > 1 else None
    gidx = None if labels is None else np.array([labels.index(g) for g in runs.group])
    return Problem(get_law("chinchilla"), {}, LawInputs.from_runs(runs), runs.loss, method, labels, gidx)


@pytest.mark.parametrize("method,groups", [("lm", 1), ("huber", 1), ("huber", 3), ("asymmetric", 1)])
def test_a_problem_over_one_block_reaches_the_dense_paths_optimum(monkeypatch, method, groups):
    """Tolerance 1e-7 relative on θ: the blocked sums differ from the dense products in the
    last bits, so the iterations may differ in their last steps, not in the optimum."""
    problem = problem_of(1500, method, groups)
    start = np.concatenate([START[:4], np.full(groups, START[4])]) if groups > 1 else START
    start = start[None].repeat(2, axis=0) + np.array([[0.0], [0.1]])
    dense = problem.solve(start)
    monkeypatch.setattr(solver, "BLOCK_ROWS", 256)
    blocked = problem.solve(start)
    assert np.array_equal(blocked.status, dense.status)
    np.testing.assert_allclose(blocked.theta, dense.theta, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(blocked.objective, dense.objective, rtol=1e-9)


def test_a_problem_of_one_block_keeps_the_dense_path(monkeypatch):
    problem = problem_of(300, "huber")
    dense = problem.solve(START[None])
    calls = []
    monkeypatch.setattr(solver, "_blocked_normal_equations",
                        lambda *a: calls.append(1) or pytest.fail("blocked path on one block"))
    again = problem.solve(START[None])
    assert not calls and np.array_equal(again.theta, dense.theta)


def test_a_solve_on_many_rows_holds_a_few_numbers_per_row(monkeypatch):
    """The Huber fit of Chinchilla's law (5 parameters) on 3 blocks of rows: peak allocations
    at most 160 bytes per row beyond the problem itself (the dense path: ≈ 250)."""
    monkeypatch.setattr(solver, "BLOCK_ROWS", 4096)
    n = 3 * solver.BLOCK_ROWS
    problem = problem_of(n, "huber")
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = problem.solve(START[None])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.status[0] == solver.CONVERGED
    assert (peak - base) / n < 160, (peak - base) / n


@pytest.mark.parametrize("name", ["depth_softplus", "depth_delusion"])
def test_a_law_at_jacobian_points_gives_each_point_the_bits_it_gives_alone(name):
    """Points that move one parameter each share the other terms' parameters, which the
    softplus computes once per distinct (κ, s): every row equals, bit for bit, the law
    evaluated at that point alone."""
    law = get_law(name)
    rng = np.random.default_rng(7)
    x = LawInputs.of(rng.integers(2, 40, 50), 2.0 ** rng.integers(5, 11, 50), 10 ** rng.uniform(6, 9, 50),
                     10 ** rng.uniform(8, 11, 50))
    base = {p.name: rng.uniform(*p.init) for p in law.params}
    K = len(law.params)
    pts = {p.name: np.full((K + 1, 1), base[p.name]) for p in law.params}
    for j, p in enumerate(law.params):
        pts[p.name][j + 1] += 1.5e-8 * max(1.0, abs(base[p.name]))
    together = law(x, **pts)
    alone = np.stack([law(x, **{k: v[i:i + 1] for k, v in pts.items()})[0] for i in range(K + 1)])
    assert together.tobytes() == alone.tobytes()


def test_the_polish_jacobian_on_a_large_table_is_the_batched_one_bit_for_bit(monkeypatch):
    """Above one block the polish's forward differences evaluate one point at a time (less
    memory): the same numbers in the same layout as the batched evaluation."""
    from depthdelusion.analysis.fitting import varpro

    jacobians = []

    def first_jacobian(fun, x0, jac, **kw):
        jacobians.append(jac(x0))
        raise ValueError("only the Jacobian is wanted")

    monkeypatch.setattr(varpro.optimize, "least_squares", first_jacobian)
    for method in ("lm", "huber"):
        problem = problem_of(3000, method)
        for rows in (10 ** 9, 1000):
            monkeypatch.setattr(varpro, "BLOCK_ROWS", rows)
            varpro._trf(problem, START)
        batched, one_at_a_time = jacobians[-2:]
        assert batched.tobytes() == one_at_a_time.tobytes()
        assert batched.flags.f_contiguous == one_at_a_time.flags.f_contiguous


def _starts_of(problem, count: int, seed: int = 3) -> np.ndarray:
    """``count`` starts over the parameters' start ranges, the first two with α at its bound 0
    (the second with the gradient pushing it out: α = 0 is as flat as the law gets)."""
    rng = np.random.default_rng(seed)
    lo = np.array([np.log(p.init[0]) if p.log else p.init[0] for p in problem.free])
    hi = np.array([np.log(p.init[1]) if p.log else p.init[1] for p in problem.free])
    starts = lo + (hi - lo) * rng.uniform(size=(count, problem.k))
    starts[:2, problem.names.index("alpha")] = 0.0
    return starts


def test_a_batch_gives_each_problem_what_it_gets_alone():
    """Least squares and Huber, a start at α's bound among them: every problem of the batch
    ends on the bits it ends on solved alone (a rejected step reuses its system; a singular one
    falls back alone)."""
    for method in ("lm", "huber"):
        problem = problem_of(200, method)
        starts = _starts_of(problem, 6)
        frozen = np.zeros(starts.shape, bool)
        frozen[3, 1] = True  # a profile point among them
        together = problem.solve(starts, frozen_MxK=frozen)
        assert solver.CONVERGED in together.status
        for i in range(len(starts)):
            alone = problem.solve(starts[i:i + 1], frozen_MxK=frozen[i:i + 1])
            assert alone.theta.tobytes() == together.theta[i:i + 1].tobytes(), (method, i)
            assert alone.status[0] == together.status[i]


def test_a_singular_system_in_a_batch_moves_no_other_problems_step():
    """The pseudo-inverse fallback is the singular system's alone."""
    rng = np.random.default_rng(0)
    B = rng.standard_normal((3, 4, 4))
    A = B @ B.transpose(0, 2, 1) + 4 * np.eye(4)
    A[1] = 0.0  # singular in floating point
    A[1, 0, 0] = 1.0
    rhs = rng.standard_normal((3, 4))
    together = solver._solve_scaled(A, rhs)
    for i in (0, 2):
        assert together[i].tobytes() == solver._solve_scaled(A[i:i + 1], rhs[i:i + 1])[0].tobytes()
    assert np.all(np.isfinite(together[1]))

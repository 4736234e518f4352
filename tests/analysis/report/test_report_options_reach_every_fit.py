"""The user's fit options reach every fit a report makes: the main fits, the design matrix's,
the extrapolation's (issue 61: these were rebuilt from the objective and the seed only, so
``--search``, ``--starts`` and ``--grid-points`` silently did not reach them)."""
import pytest

from depthdelusion.analysis.fitting import engine
from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.report.build import build_report
from depthdelusion.analysis.report.options import ReportOptions
from depthdelusion.cli import build_parser

from .test_report_design import two_budget_runs


@pytest.fixture
def searches(monkeypatch) -> list:
    """(starts, description) of every global search the fits run while the test runs, as the
    search itself reports it."""
    found_searches = []
    real_search = engine.run_search

    def recorded(*args, **kwargs):
        found = real_search(*args, **kwargs)
        found_searches.append((found.summary.n_starts, found.describe))
        return found

    monkeypatch.setattr(engine, "run_search", recorded)
    return found_searches


def test_every_fit_of_a_report_uses_the_search_and_starts_asked_for(searches):
    # the options as `report RUNS --search multistart --starts 7 ...` parses them
    args = vars(build_parser().parse_args(["report", "runs.csv", "--out", "x", "--search", "multistart",
                                           "--starts", "7", "--bootstrap", "0", "--profile", "none"]))
    options = FitOptions.from_arguments(args)
    assert (options.search, options.starts) == ("multistart", 7)
    report, md, _ = build_report(two_budget_runs(), ReportOptions(
        fit=options, laws=("depth_delusion", "kaplan"), runs_label="synthetic", lr_replicates=0))
    r = report.results
    # two main fits, 4 forms x 2 conventions x 2 laws in the design matrix, 2 extrapolation fits
    assert len(r.design.matrix) == 8 and len(searches) >= 2 + 16 + 2
    assert all(n == 7 and describe.startswith("multi-start: 7 starts") for n, describe in searches), \
        sorted(set(searches))
    # and each fit records the options it was made with
    made = [*r.fits.values(), *(lf for _, lf, _ in r.design.matrix.values() if lf is not None)]
    assert all(f.options.search == "multistart" and f.options.starts == 7 for f in made)
    assert "--search multistart --starts 7" in md  # the "Regenerate with" line repeats them


def test_the_report_command_with_search_and_starts_makes_every_fit_with_them(searches, tmp_path):
    """`depthdelusion report RUNS --search multistart --starts 7`, end to end: every fit the
    command makes (main fits, rivals, design matrix, extrapolation) runs a 7-start multi-start."""
    from depthdelusion.cli import main

    csv_path = tmp_path / "runs.csv"
    two_budget_runs().to_dataframe().to_csv(csv_path, index=False)
    assert main(["report", str(csv_path), "--out", str(tmp_path / "out"), "--bootstrap", "0", "--profile", "none",
                 "--search", "multistart", "--starts", "7", "--no-figures"]) == 0
    assert len(searches) >= 20  # 6 laws and the size rival, the design matrix's 16, the extrapolation's
    assert all(n == 7 and describe.startswith("multi-start: 7 starts") for n, describe in searches), \
        sorted(set(searches))


def test_the_report_command_line_takes_the_search_options_into_its_fit_options():
    args = vars(build_parser().parse_args(["report", "paper", "--out", "x", "--search", "multistart",
                                           "--starts", "7", "--grid-points", "2"]))
    options = FitOptions.from_arguments(args)
    assert (options.search, options.starts, options.grid_points) == ("multistart", 7, 2)


@pytest.fixture
def start_grids(monkeypatch) -> list:
    """(grid_points, max_starts) of every start grid the likelihood-ratio refits
    (`refits.refit_rss`) draw while the test runs."""
    from depthdelusion.analysis.fitting import refits

    grids = []
    real_grid = refits.start_grid

    def recorded(problem, grid_points, max_starts, seed):
        grids.append((grid_points, max_starts))
        return real_grid(problem, grid_points, max_starts, seed)

    monkeypatch.setattr(refits, "start_grid", recorded)
    return grids


def test_the_likelihood_ratio_tests_refit_with_the_fit_s_objective_and_starts(start_grids):
    """The parametric bootstrap's replicate refits (`refits.default_refit`) minimise the fit's own
    objective (here its asymmetric weight) from the starts the user asked for; they were rebuilt
    from the method and seed alone: least squares from 16 starts."""
    from depthdelusion.analysis import fit
    from depthdelusion.analysis.fitting import refits

    runs = two_budget_runs()
    f = fit(runs, "kaplan", loss="asymmetric", overestimate_weight=20.0, max_starts=7, bootstrap=0, profile="none",
            leave_one_out=False)
    (rss,) = refits.default_refit(f)(runs, f.law, [runs.loss])
    assert abs(rss - f.rss) <= 1e-6 * f.rss, (rss, f.rss)  # the refit of the fit's own losses is the fit
    assert start_grids == [(3, 7)]


def test_the_report_s_likelihood_ratio_replicates_refit_from_the_starts_asked_for(start_grids):
    """With lr_replicates > 0 the report's λ = 0 tests are parametric bootstraps: every replicate
    refit (`refits.refit_rss`, through `refits.start_grid`) starts from the user's --starts and
    --grid-points, not the refits' own 16 starts on a 3-point grid."""
    options = FitOptions(bootstrap=0, search="multistart", starts=7, grid_points=2, profile="none")
    report, _, _ = build_report(two_budget_runs(), ReportOptions(
        fit=options, laws=("depth_delusion", "kaplan"), runs_label="synthetic", lr_replicates=2))
    tests = [v.test for v in report.results.verdicts]
    assert tests and all(t.method == "parametric bootstrap" and t.replicates == 2 for t in tests), tests
    assert start_grids and set(start_grids) == {(2, 7)}, sorted(set(start_grids))

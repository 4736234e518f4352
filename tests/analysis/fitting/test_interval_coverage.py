"""Coverage is the contract (issue 59 item 2): on simulated tables with a known truth, the
engine's 95% intervals hold the true value in about 95% of the tables, for every identified
parameter. A CI-sized version of the study in benchmarks/RESULTS.md ("Coverage of the 95%
intervals"), with the study's own code (benchmarks/interval_coverage.py), 100 tables a case.

The tolerance. A table's interval covers or not, so with n identified tables the covered count
of a method whose true coverage is p is Binomial(n, p). The bar is 0.93–0.97 (issue 59); a case
fails when its count lies below the 0.1% quantile of Binomial(n, 0.93), i.e. when a method at
the bar's lower end would land that low once in a thousand draws. With n = 100 that is fewer than
84 covered: a method covering 0.93 passes all but surely, one covering 0.67 (the half-width
interval below: 60–71 of 100 on these tables) fails all but surely. A method covering 0.88
would still pass nine times in ten: 100 tables tell a broken interval from a sound one,
not 0.93 from 0.90; the 500-table study in benchmarks/RESULTS.md does that.
At n = 100 over-coverage cannot be told from 0.97 (the count's 99.9% quantile is 100), so the
test guards against intervals that are too narrow, the failure a reader cannot see. The tables
are seeded, so the counts are fixed on one machine; the tolerance is also what absorbs a table
whose interval end moves across the truth on another BLAS.
"""
import sys
from pathlib import Path

import pytest
from scipy.stats import binom

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import interval_coverage  # noqa: E402

TABLES = 100
BAR = 0.93  # the lower end of issue 59's bar for a 95% interval
ONE_IN = 1000  # a method at the bar fails a case this rarely


def too_narrow(records: list[dict], interval: str = "profile") -> list[str]:
    """The parameters whose covered count (of the identified tables) lies below the
    1/``ONE_IN`` quantile of Binomial(identified, ``BAR``), each with its count."""
    failures = []
    for s in interval_coverage.summarise(records, interval):
        floor = binom.ppf(1 / ONE_IN, s["identified"], BAR)
        if s["covered"] < floor:
            failures.append(f"{s['kind']} {s['method']} {s['param']}: {s['covered']}/{s['identified']} "
                            f"covered (at least {floor:.0f} needed)")
    return failures


# (kind, profile finder, interval judged): each finder on a table kind where it is cheap, and the
# run-clustered suite by its cluster bootstrap (its profile assumes independent rows). About 65
# CPU seconds in all; the kink law (2 s a fit) and the 3,000-row tables are the study's only.
CASES = [
    ("chinchilla30", "fast", "profile"),
    ("chinchilla240", "full", "profile"),
    ("clustered", "fast", "bootstrap"),
]


@pytest.mark.parametrize("kind, method, interval", CASES)
def test_the_95_intervals_cover_the_truth(kind, method, interval):
    bootstrap = interval_coverage.CLUSTER_BOOTSTRAP if interval == "bootstrap" else 0
    records = interval_coverage.run(kind, method, TABLES, bootstrap=bootstrap)
    summary = interval_coverage.summarise(records, interval)
    assert all(s["identified"] >= TABLES // 2 for s in summary), interval_coverage.markdown(summary)
    assert not too_narrow(records, interval), interval_coverage.markdown(summary, interval)


def test_the_one_step_bootstrap_in_random_blocks_covers_the_truth(monkeypatch):
    """The block draw of a large table's one-step bootstrap (from 100,000 rows, 10,000 blocks: of
    10 rows), in miniature: the 3,000-row tables in 300 blocks of 10 rows. The 500-table study at
    its real size, beside the row draw, is in benchmarks/RESULTS.md ("The one-step bootstrap in
    blocks")."""
    from depthdelusion.analysis.fitting import block_sums, resampling

    monkeypatch.setattr(resampling, "BLOCK_SUMS_FROM_ROWS", 3000)
    monkeypatch.setattr(block_sums, "BLOCKS", 300)
    records = interval_coverage.run("chinchilla3000", "blocks", TABLES, bootstrap=interval_coverage.CLUSTER_BOOTSTRAP)
    summary = interval_coverage.summarise(records, "bootstrap")
    assert all(s["identified"] >= TABLES // 2 for s in summary), interval_coverage.markdown(summary)
    assert not too_narrow(records, "bootstrap"), interval_coverage.markdown(summary, "bootstrap")


def test_a_half_width_interval_fails_the_check():
    """The check can fail: the same tables with every interval shrunk to half its width about
    the estimate (the study's ``shrink``) cover far too rarely, for every parameter."""
    records = interval_coverage.run("chinchilla30", "fast", TABLES, shrink=0.5)
    failed = too_narrow(records)
    assert len(failed) == len(interval_coverage.KINDS["chinchilla30"].truth), failed

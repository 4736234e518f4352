"""The public-shapes study in miniature: the real Gemstones tables, downloaded by name from a
local mirror of the shared test copies (issue 50's path), a subset of the laws, few resamples."""
import csv

import pytest

from depthdelusion.cli import main

from tests.analysis.table.test_published_downloads import PUBLISHED, Server

pytestmark = pytest.mark.skipif(not PUBLISHED.is_dir(), reason=f"no test copies at {PUBLISHED}")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    server = Server(PUBLISHED)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NO_PROXY", "127.0.0.1,localhost")
        mp.setenv("no_proxy", "127.0.0.1,localhost")
        mp.setenv("DEPTHDELUSION_TABLES_URL", server.url)
        mp.setenv("DEPTHDELUSION_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield server
    server.stop()


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def study(mirror, tmp_path_factory):
    out = tmp_path_factory.mktemp("public_shapes")
    code = main(["public-shapes", "--out", str(out), "--bootstrap", "8", "--replicates", "9",
                 "--tables", "gemstones", "--conventions", "total",
                 "--laws", "chinchilla,depth_delusion_power,shape_quadratic"])
    assert code == 0
    return out


def test_the_miniature_writes_every_output_with_cluster_resampling_named(study):
    for name in ("report.md", "laws.csv", "tests.csv", "critical_depth.csv", "lr_interaction.csv", "audit.csv"):
        assert (study / name).is_file(), name
    report = (study / "report.md").read_text()
    assert "8 cluster-bootstrap refits per law" in report and "per-run random effect" in report
    laws = _rows(study / "laws.csv")
    assert {r["law"] for r in laws} == {"chinchilla", "depth_delusion_power", "shape_quadratic"}
    assert {r["runs"] for r in laws} == {"22"} and {r["rows"] for r in laws} == {"220"}
    assert {r["status"] for r in laws} <= {"ok", "at_bound", "not_identified"}
    tests = _rows(study / "tests.csv")
    assert [(t["test"], t["against"]) for t in tests] == [("lambda = 0", "chinchilla"),
                                                          ("kink vs best smooth", "shape_quadratic")]
    assert {t["method"] for t in tests} == {"parametric bootstrap"}
    assert len(_rows(study / "lr_interaction.csv")) == 4


def test_on_gemstones_the_kink_leaves_the_data_and_the_shallowest_shape_loses_most(study):
    """Facts of the hot table whatever the resampling: the fitted critical depth lies past every
    checkpoint (so its exponent is reported as not identified), and the shape with the largest
    excess loss over chinchilla is the shallowest, 768x3 — not a deep, narrow one."""
    report = (study / "report.md").read_text()
    assert "p is not identified (no checkpoint lies past the fitted D_crit" in report
    audit = _rows(study / "audit.csv")
    assert len(audit) == 22
    worst = max(audit, key=lambda r: float(r["excess_loss_vs_chinchilla"]))
    assert worst["shape"] == "768x3" and float(worst["d_over_d_crit_paper"]) < 1


def test_an_unknown_table_is_one_line_naming_the_flag(tmp_path, capsys):
    assert main(["public-shapes", "--out", str(tmp_path), "--tables", "gemstone"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "--tables 'gemstone': expected a comma-separated list of gemstones, gemstones_cooldown" in err

"""`data-exponent --refit-tables`: the committed study's measured b refitted from its runs.csv
with the small-sample (F-calibrated) profile interval, the spectra's columns kept."""
import csv
import shutil
from pathlib import Path

from depthdelusion.cli import main

COMMITTED = Path(__file__).resolve().parents[2] / "analysis" / "data_exponent"


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_refit_tables_reproduces_the_committed_study(tmp_path):
    study = tmp_path / "study"
    shutil.copytree(COMMITTED, study)
    assert main(["data-exponent", str(study), "--out", str(tmp_path / "refit"), "--refit-tables"]) == 0
    old = {r["sweep"]: r for r in _rows(COMMITTED / "exponents.csv")}
    new = {r["sweep"]: r for r in _rows(tmp_path / "refit" / "exponents.csv")}
    assert set(new) == {"w32", "w64", "zipf0.6", "zipf1.6"}
    for name, r in new.items():
        for col in ("b_measured", "b_lo", "b_hi"):  # 3 decimals; last-bit CPU differences
            assert abs(float(r[col]) - float(old[name][col])) <= 0.002, (name, col)
        assert r["b_predicted"] == old[name]["b_predicted"] and r["verdict"] == old[name]["verdict"]
    # six runs, three parameters: the F(1, 3) cut keeps W = 32's interval wide enough to hold the
    # prediction 0.449 (χ²₁ gave [0.281, 0.404] and the verdict "measured < predicted")
    assert float(new["w32"]["b_lo"]) < 0.27 and float(new["w32"]["b_hi"]) > 0.449
    assert new["w32"]["verdict"] == "consistent"
    tables = (tmp_path / "refit" / "tables.md").read_text()
    assert "--refit-tables" in tables and "F(1, n − 3)-calibrated" in tables

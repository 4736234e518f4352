"""`data-exponent --refit-tables`: the committed study's measured b refitted from its runs.csv
with the small-sample (F-calibrated) profile interval, the spectra's columns kept."""
import csv
import dataclasses
import shutil
from pathlib import Path

import pytest

from depthdelusion.studies.data_exponent import study as data_exponent
from depthdelusion.studies.common.spec import from_flags

COMMITTED = Path(__file__).resolve().parents[3] / "analysis" / "data_exponent"


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_refit_tables_reproduces_the_committed_study(tmp_path):
    study = tmp_path / "study"
    shutil.copytree(COMMITTED, study)
    # the study's shape: refit() to frozen results, written and rendered (sections) from them
    # (the command line's --refit-tables, on gs://: tests/studies/test_gcs_studies.py)
    results = data_exponent.refit(study, command="depthdelusion data-exponent STUDY --refit-tables")
    with pytest.raises(dataclasses.FrozenInstanceError):
        results.refit = False
    data_exponent.write_outputs(results, tmp_path / "refit")
    assert (tmp_path / "refit" / "tables.md").read_text() == data_exponent.sections(results)
    assert not (tmp_path / "refit" / "runs.csv").exists()  # a refit rewrites only what it refits
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


def test_a_bad_value_of_the_study_is_one_line_naming_its_flag():
    with pytest.raises(ValueError, match=r"^--tokens=0: must be a positive integer$"):
        from_flags(data_exponent.DataExponentSpec, {"root": "runs", "tokens": 0})
    with pytest.raises(ValueError, match=r"^--largest-only='yes': must be true or false$"):
        from_flags(data_exponent.DataExponentSpec, {"root": "runs", "largest_only": "yes"})

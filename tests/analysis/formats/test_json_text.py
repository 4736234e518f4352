"""The JSON writer of the fit's output: the text json.dumps(indent=2) writes, at C speed."""
import json
import math

import numpy as np
import pytest

from depthdelusion.analysis import fit
from depthdelusion.analysis.formats.json_text import Rows, dump, dumps
from depthdelusion.analysis.table.runs import Runs

DOC = {"law": "chinchilla", "n": 3, "empty": {}, "none": [], "flag": True, "off": False, "x": None,
       "unicode": "α ≈ 0.29, “quoted” \"and\" \\ back\n", "ints": [1, -2, 10 ** 20],
       "floats": [0.1, 1e-300, -2.5e17, 1.0, 3.0000000000000004], "nested": [{"a": [[], {}]}, [1, [2]]],
       "numpy": {"i": np.int64(7), "f": np.float64(0.2)},
       "rows": {f"run{i}": 1.0 / (i + 1) for i in range(70_000)}, 1: "int key", 2.5: "float key"}


def test_the_text_is_what_json_dumps_writes_with_indent_2():
    expected = json.dumps({**DOC, "numpy": {"i": 7, "f": 0.2}}, indent=2, allow_nan=False)
    assert dumps(DOC) == expected
    parts = []
    dump(DOC, parts.append)
    assert "".join(parts) == expected and len(parts) > 2  # written in pieces


def test_a_non_finite_number_is_null_when_asked_and_an_error_otherwise():
    doc = {"ci": [0.0, math.inf], "se": [math.nan, -math.inf]}
    assert json.loads(dumps(doc, null_nonfinite=True)) == {"ci": [0.0, None], "se": [None, None]}
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps(doc)
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"a": object()})


def test_a_fits_json_is_its_dict_with_open_ends_as_null():
    n = np.geomspace(1e7, 1e10, 12)
    runs = Runs(params=n, loss=1.8 + 480 * n ** -0.35 * (1 + 0.01 * np.sin(np.arange(12))))
    result = fit(runs, "kaplan", bootstrap=20, diagnostics=True)
    doc = json.loads(result.to_json())
    assert doc["residuals"] == pytest.approx(result.to_dict()["residuals"])
    assert list(doc["diagnostics"]["robust_z"]) == [f"{nm} (row {i + 1})" for i, nm in enumerate(runs.name)]
    text = json.dumps(doc, indent=2, allow_nan=False)
    assert result.to_json() == text
    streamed = result.json_doc()  # what `fit --json` writes: per-row numbers from the arrays
    assert isinstance(streamed["residuals"], Rows)
    assert all(isinstance(streamed["diagnostics"][k], Rows) for k in ("robust_z", "leverage", "cooks_distance"))
    assert dumps(streamed, null_nonfinite=True) == dumps(result.to_dict(), null_nonfinite=True) == text


def test_per_row_numbers_are_written_as_their_dict_would_be():
    names = [np.str_(f"run{i}") for i in range(70_000)]  # more than one block of entries
    values = 1.0 / (np.arange(70_000) + 1.0)
    values[[3, 65_540]] = [math.nan, math.inf]
    as_dict = {n: (float(v) if math.isfinite(v) else None) for n, v in zip(names, values)}
    assert dumps({"r": Rows(names, values)}, null_nonfinite=True) == json.dumps({"r": as_dict}, indent=2)
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps(Rows(names, values))
    repeated = ["a", "b", "a", "c"]  # a dict keeps a name where it first appears, with its last value
    assert dumps(Rows(repeated, [1.0, 2.0, 3.0, 4.0])) == json.dumps({"a": 3.0, "b": 2.0, "c": 4.0}, indent=2)
    assert dumps({"empty": Rows([], []), "x": [Rows([], [])]}) == json.dumps({"empty": {}, "x": [{}]}, indent=2)
    with pytest.raises(ValueError, match="2 names for 1 values"):
        Rows(["a", "b"], [1.0])

"""Tables as they come: a byte-order mark, tabs or semicolons, parquet, other column names,
duplicated rows, replicate cells (learning rates, seeds), a table's own non-embedding count."""
import numpy as np
import pytest

from depthdelusion.analysis import fit
from depthdelusion.analysis.fitting.replicates import reduce_replicates, replicate_cells
from depthdelusion.analysis.table.load import load_runs
from depthdelusion.analysis.table.table_readers import read_table
from depthdelusion.cli import main

ROWS = [(1e7 * 3 ** i, 1e9 * 2 ** (i % 4), 1.8 + 480 * (1e7 * 3 ** i) ** -0.35
         + 2000 * (1e9 * 2 ** (i % 4)) ** -0.37) for i in range(8)]


def write(path, sep=",", bom=False, header=("params", "tokens", "loss")):
    text = sep.join(header) + "\n" + "".join(sep.join(f"{v:.6g}" for v in row) + "\n" for row in ROWS)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return path


@pytest.mark.parametrize("sep", [",", "\t", ";"])
def test_delimiters_and_a_byte_order_mark_are_read(tmp_path, sep):
    runs = read_table(write(tmp_path / "t.csv", sep=sep, bom=True))
    assert len(runs) == 8 and runs.has("params") and runs.has("tokens")
    assert np.allclose(runs.loss, [r[2] for r in ROWS], rtol=1e-5)


def test_parquet_is_read_and_a_bad_one_is_named(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    path = tmp_path / "t.parquet"
    pd.DataFrame(ROWS, columns=["params", "tokens", "final_loss"]).to_parquet(path)
    runs = load_runs(str(path))
    assert len(runs) == 8 and np.allclose(runs.loss, [r[2] for r in ROWS])
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(ValueError, match="bad.parquet: not a readable parquet file"):
        load_runs(str(bad))


def test_column_flag_maps_a_column(tmp_path, capsys):
    path = write(tmp_path / "t.csv", header=("N_total", "tokens", "val")).as_posix()
    assert main(["fit", path, "--law", "kaplan", "--bootstrap", "0",
                 "--column", "loss=val", "--column", "params=N_total"]) == 0
    assert "Law 'kaplan'" in capsys.readouterr().out


def test_duplicated_rows_are_counted_and_warned(tmp_path, capsys):
    path = tmp_path / "t.csv"
    write(path)
    path.write_text(path.read_text() + path.read_text().splitlines()[1] + "\n")
    runs = load_runs(str(path))
    assert any("1 row(s) repeat an earlier row" in n and "rows 9" in n for n in runs.notes)
    assert main(["fit", str(path), "--law", "kaplan", "--bootstrap", "0"]) == 0
    assert "warning: " in capsys.readouterr().err


def test_a_duplicated_header_is_refused_naming_the_file_and_the_column(tmp_path, capsys):
    """`loss,loss` used to read the last column silently (R² = nan on this table)."""
    path = write(tmp_path / "t.csv", header=("params", "loss", "loss"))
    assert main(["fit", str(path), "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err
    assert "column 'loss' appears 2 times in the header (columns 2, 3)" in err
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(ROWS, columns=["params", "tokens", "tokens"])
    with pytest.raises(ValueError, match="DataFrame: column 'tokens' appears 2 times"):
        load_runs(frame)


def replicate_table(tmp_path):
    rng = np.random.default_rng(0)
    lines = ["params,tokens,lr,seed,loss"]
    for n in np.geomspace(1e7, 1e10, 8):
        for lr in (1e-3, 3e-3, 1e-2):
            for seed in (0, 1):
                loss = 1.8 + 480 * n ** -0.35 + 0.02 * abs(np.log10(lr) + 2.5) + 0.01 * rng.standard_normal()
                lines.append(f"{n:.0f},1e10,{lr},{seed},{loss:.5f}")
    path = tmp_path / "sweep.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_replicate_cells_are_named_and_reduced(tmp_path):
    runs = load_runs(str(replicate_table(tmp_path)))
    cells = replicate_cells(runs)
    assert len(cells.cells) == 8 and cells.varying == ["lr", "seed"]
    r = fit(runs, "kaplan", bootstrap=0, profile=False)
    assert any("48 of 48 rows fall in 8 replicate cells" in n and "lr, seed" in n for n in r.notes)
    best = reduce_replicates(runs, "best-of=lr")
    assert len(best) == 16  # 8 cells x 2 seeds
    assert any("biases the loss down" in n and "s.d." in n for n in best.notes)
    both = reduce_replicates(best, "mean=seed")
    assert len(both) == 8 and np.all(both.loss_se > 0)
    assert not replicate_cells(both).cells
    with pytest.raises(ValueError, match="no column 'batch'"):
        reduce_replicates(runs, "best-of=batch")
    with pytest.raises(ValueError, match="expected best-of=COLUMN"):
        reduce_replicates(runs, "min=lr")
    fitted = fit(both, "kaplan", bootstrap=0, profile=False)
    assert not any("replicate cells" in n for n in fitted.notes)


def test_a_tables_own_non_embedding_count_is_used_as_given(tmp_path):
    from depthdelusion.analysis.report.consistency import with_param_convention

    path = tmp_path / "t.csv"
    path.write_text("depth,width,params,params_non_embedding,loss\n"
                    "2,64,1000000,12345,3.0\n4,128,2000000,67890,2.9\n")
    runs, notes = with_param_convention(load_runs(str(path)), "non_embedding")
    assert list(runs.params) == [12345, 67890] and "own non-embedding" in notes[0]


def test_reduce_repeats_in_order_and_the_hint_fits_what_differs(tmp_path, capsys):
    path = str(replicate_table(tmp_path))
    assert main(["fit", path, "--law", "kaplan", "--bootstrap", "0", "--json",
                 "--reduce", "best-of=lr", "--reduce", "mean=seed"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["n"] == 8 and sum("replicates reduced" in n for n in doc["notes"]) == 2
    # cells that differ in a text column with few values are groups, not replicates to reduce
    lines = ["params,tokens,dataset,loss"] + [f"{n:.0f},1e10,{d},{1.8 + 480 * n ** -0.35 + g:.5f}"
                                               for n in np.geomspace(1e7, 1e10, 8)
                                               for d, g in (("web", 0.0), ("code", 0.1))]
    (tmp_path / "ds.csv").write_text("\n".join(lines) + "\n")
    note = replicate_cells(load_runs(str(tmp_path / "ds.csv"))).describe(load_runs(str(tmp_path / "ds.csv")))
    assert "--by dataset" in note and "--reduce" not in note
    copies = load_runs([{"params": 1e8, "tokens": 1e10, "loss": 3.0}] * 2
                       + [{"params": 2e8, "tokens": 1e10, "loss": 2.9}])
    assert "exact copies" in replicate_cells(copies).describe(copies)


def test_fit_params_non_embedding_uses_the_tables_own_column(tmp_path, capsys):
    import json

    lines = ["depth,width,params,params_non_embedding,loss"]
    for d in (2, 4, 8, 16):
        for w in (256, 512, 1024):
            ne = d * (12 * w * w + 13 * w) + 7 * w  # not the formula: the column must be used
            lines.append(f"{d},{w},{ne + 2 * 50257 * w},{ne},{1.8 + 400 * ne ** -0.3:.6f}")
    path = tmp_path / "ne.csv"
    path.write_text("\n".join(lines) + "\n")
    assert main(["fit", str(path), "--law", "kaplan", "--bootstrap", "0", "--json",
                 "--params", "non_embedding"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "N convention: the runs' own non-embedding counts" in doc["notes"]
    assert doc["rmse"] < 1e-3 and doc["params"]["alpha"] == pytest.approx(0.3, abs=0.01)


def _read_by_dicts(path):
    """The csv module's dicts, one per row: the reader the column reader must agree with."""
    import csv
    import io

    from depthdelusion.analysis.table.table_readers import runs_from_records

    text = path.read_bytes().decode("utf-8-sig")
    sep = "\t" if "\t" in text.splitlines()[0] else ","
    return runs_from_records(list(csv.DictReader(io.StringIO(text, newline=""), delimiter=sep)),
                             where=str(path))


def _same_runs(a, b):
    for key, value in vars(a).items():
        other = getattr(b, key)
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype and list(value) == list(other) or np.array_equal(
                value, other, equal_nan=True), key
        elif isinstance(value, dict):
            assert {k: list(v) if isinstance(v, np.ndarray) else v for k, v in value.items()} == {
                k: list(v) if isinstance(v, np.ndarray) else v for k, v in other.items()}, key
        else:
            assert value == other, key


@pytest.mark.parametrize("text", [
    # text columns, an unread column of text and one of numbers, a blank line, a repeated row
    "name,group,d_model,n_layers,params,tokens,loss,dataset,lr\n"
    "a,web,64,2,1e7,1e9,3.1,web,1e-3\nb,web,128,4,4e7,2e9,2.9,web,3e-3\n\n"
    "a,web,64,2,1e7,1e9,3.1,web,1e-3\nc,code,256,8,1.6e8,4e9,2.7,code, 1e-2\n",
    # D read as tokens from its values, a params_millions column scaled to whole counts, a tab
    "params_millions\tD\tloss\n10.5\t2e9\t3.0\n40.25\t4e9\t2.8\n160\t8e9\t2.6\n",
    # a misspelled unread column of numbers is named in the notes (its field is not decisive)
    "params,tokens,loss,loss_sterr\n1e7,1e9,3.1,0.01\n4e7,2e9,2.9,0.02\n1.6e8,4e9,2.7,0.01\n",
])
def test_a_csv_read_by_columns_gives_the_runs_and_notes_of_the_row_by_row_reader(tmp_path, text):
    path = tmp_path / "t.csv"
    path.write_text(text)
    by_columns, by_rows = read_table(path), _read_by_dicts(path)
    _same_runs(by_columns, by_rows)
    assert by_columns.notes == by_rows.notes and by_columns.source == str(path)


@pytest.mark.parametrize("cell, message", [("", "field 'loss' is empty"),
                                           ("x", "field 'loss' = 'x' is not a number"),
                                           ("-1", "field 'loss' = '-1'; expected a positive")])
def test_a_bad_cell_in_a_large_csv_is_still_named_by_file_row_and_column(tmp_path, cell, message):
    rows = [f"{1e7 * (1 + i)},{1e9},{3.0 - i * 1e-5}" for i in range(70_000)]
    rows[66_000] = rows[66_000].rsplit(",", 1)[0] + "," + cell  # in the column reader's 2nd block
    path = tmp_path / "big.csv"
    path.write_text("params,tokens,loss\n" + "\n".join(rows) + "\n")
    with pytest.raises(ValueError, match=f"big.csv row 66001: {message}"):
        read_table(path)


def test_reading_a_csv_keeps_no_python_object_per_field(tmp_path):
    """The reading's peak allocation per row, by tracemalloc (counts, not time): 909 bytes per
    row of three numbers with the csv module's dicts and one StringIO of the whole text; 440
    with float columns and a StringIO per block (most of it the Runs' own default run names)."""
    import tracemalloc

    n = 20_000
    path = tmp_path / "rows.csv"
    path.write_text("params,tokens,loss\n" + "".join(
        f"{1e7 + 997 * i!r},{1e9 + 7919 * i!r},{3.0 + i * 1e-6!r}\n" for i in range(n)))
    tracemalloc.start()
    runs = read_table(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(runs) == n
    assert peak / n < 650, f"{peak / n:.0f} bytes per row at the peak"

"""Any table a law can use: only the columns the law needs, aliases, an explicit mapping, and
errors that name the missing column and the law that needs it."""
import numpy as np
import pytest

from depthdelusion.analysis import Runs, fit, law_columns, law_missing_columns, laws_for, load_runs
from depthdelusion.analysis.table.columns import present_columns
from depthdelusion.analysis.table.law_columns import check_law_columns

# Chinchilla-like truth: L = E + A N^-alpha + B T^-beta (Hoffmann et al.'s published estimate).
E, A, ALPHA, B, BETA = 1.69, 406.4, 0.34, 410.7, 0.28


def chinchilla_rows(n=24, seed=0, noise=0.003, tokens_vary=True):
    rng = np.random.default_rng(seed)
    N = np.geomspace(2e7, 2e9, n)
    T = np.geomspace(4e8, 4e10, n)[rng.permutation(n)] if tokens_vary else np.full(n, 1e10)
    loss = E + A * N ** -ALPHA + B * T ** -BETA + noise * rng.standard_normal(n)
    return N, T, loss


def write_csv(path, header, rows):
    path.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def test_params_loss_table_fits_kaplan_and_refuses_a_depth_law_naming_the_column(tmp_path):
    N, _, loss = chinchilla_rows(tokens_vary=False)
    path = write_csv(tmp_path / "pl.csv", ["params", "loss"], zip(N, loss))
    runs = load_runs(path)
    assert present_columns(runs) == ["params", "loss", "group", "name"]
    assert np.isnan(runs.depth).all() and np.isnan(runs.tokens).all()
    assert laws_for(runs) == ["kaplan", "size_kink"]
    r = fit(runs, "kaplan", bootstrap=0, leave_one_out=False)
    assert r.r2 > 0.99
    with pytest.raises(ValueError, match=r"law 'depth_delusion' needs depth \(read from: depth, "
                       r"n_layers.*\), width \(read from: width, d_model.*pl\.csv lack.*"
                       r"Laws this table can fit: kaplan"):
        fit(runs, "depth_delusion", bootstrap=0)


def test_chinchilla_notation_table_reads_L_as_loss_and_D_as_tokens_from_its_values(tmp_path):
    N, T, loss = chinchilla_rows()
    # Chinchilla's own notation: N parameters, D tokens (data), L loss.
    path = write_csv(tmp_path / "ndl.csv", ["N", "D", "L"], zip(N, T, loss))
    runs = load_runs(path)
    assert present_columns(runs) == ["params", "tokens", "loss", "group", "name"]
    assert runs.column_sources == {"params": "N", "loss": "L", "tokens": "D"}
    assert runs.read_as["D"].startswith("column D read as tokens: its values (4e+08–4e+10) are far "
                                        "beyond any depth")
    r = fit(runs, "chinchilla", bootstrap=0, leave_one_out=False)
    assert abs(r.params["alpha"] - ALPHA) < 0.05 and abs(r.params["E"] - E) < 0.1
    assert "column D read as tokens" in r.summary().splitlines()[0]  # on the line naming the law
    # an explicit mapping still wins
    runs = load_runs(path, columns={"loss": "L", "tokens": "D"})
    assert runs.read_as == {} and laws_for(runs) == ["chinchilla", "kaplan", "size_kink"]


def test_compute_column_aliases_and_D_read_through_C_equal_6ND(tmp_path):
    N, T, loss = chinchilla_rows()
    for name in ("C", "flops", "compute", "budget_flops"):
        path = write_csv(tmp_path / f"{name}.csv", [name, "N", "D", "L"], zip(6 * N * T, N, T, loss))
        runs = load_runs(path)
        assert runs.column_sources["compute"] == name
        np.testing.assert_allclose(runs.compute, 6 * N * T)
        assert "C ≈ 6·N·D (median relative difference 0.0%)" in runs.read_as["D"]
    # D small enough to be depth by size, but C = 6ND says tokens
    small = [{"C": 6 * 1e6 * d, "N": 1e6, "D": d, "L": 3.0 + 0.1 / d} for d in (100, 200, 400)]
    assert "C ≈ 6·N·D" in load_runs(small).read_as["D"]
    assert load_runs(small).tokens.tolist() == [100, 200, 400]


def test_D_as_depth_from_small_whole_numbers_and_a_clear_error_when_neither():
    rows = [{"D": d, "W": 256, "N": 1e6 * d, "loss": 3.0 + 0.01 * d} for d in (2, 4, 8, 16)]
    runs = load_runs(rows)
    assert runs.depth.tolist() == [2, 4, 8, 16] and np.isnan(runs.tokens).all()
    assert runs.read_as["D"] == "column D read as depth (layers): whole numbers 2–16"
    with pytest.raises(ValueError, match=r"column 'D' \(1.5–4\) is neither depth .* nor tokens .*"
                       r"say which with --columns tokens=D or --columns depth=D"):
        load_runs([{"D": d, "N": 1e6, "loss": 3.0} for d in (1.5, 2.5, 4.0)])
    with pytest.raises(ValueError, match=r"column 'L' holds whole numbers only .*layers, not a loss\? "
                       r"Name the loss column with --columns loss=NAME"):
        load_runs([{"N": 1e6 * d, "L": d} for d in (2, 4, 8)])
    # a table with its own loss column leaves L alone (layers elsewhere)
    runs = load_runs([{"N": 1e6, "L": 12, "loss": 3.1}, {"N": 2e6, "L": 24, "loss": 3.0}])
    assert runs.loss.tolist() == [3.1, 3.0] and "L" in runs.unread_columns


def test_aliases_scaled_columns_list_of_dicts_and_dataframe_agree():
    rows = [{"n_layers": d, "d_model": w, "params_millions": n, "T": 1e9, "final_loss": l}
            for d, w, n, l in [(2, 64, 1.5, 4.0), (4, 64, 2.5, 3.9), (4, 128, 7.0, 3.7)]]
    runs = load_runs(rows)
    assert runs.depth.tolist() == [2, 4, 4] and runs.depth.dtype == np.int64
    assert runs.width.tolist() == [64, 64, 128]
    assert runs.params.tolist() == [1.5e6, 2.5e6, 7e6]
    assert runs.tokens.tolist() == [1e9] * 3 and runs.loss.tolist() == [4.0, 3.9, 3.7]
    assert list(runs.name) == ["2Lx64", "4Lx64", "4Lx128"]
    pd = pytest.importorskip("pandas")
    frame = load_runs(pd.DataFrame(rows))
    assert frame.params.tolist() == runs.params.tolist() and present_columns(frame) == present_columns(runs)


def test_two_columns_for_one_field_and_bad_mappings_are_clear_errors():
    with pytest.raises(ValueError, match=r"columns 'params', 'N' all give params; keep one, or "
                       r"choose with --columns params=NAME"):
        load_runs([{"params": 1e6, "N": 2e6, "loss": 3.0}])
    with pytest.raises(ValueError, match=r"column mapping lr=x: 'lr' is not a column name; valid names: depth"):
        load_runs([{"x": 1.0, "loss": 3.0}], columns={"lr": "x"})
    with pytest.raises(ValueError, match=r"column mapping params=n: list of runs has no column 'n'; "
                       r"its columns: N, loss"):
        load_runs([{"N": 1e6, "loss": 3.0}], columns={"params": "n"})
    with pytest.raises(ValueError, match="a column mapping applies to tables"):
        load_runs("paper", columns={"loss": "x"})


def test_runs_constructor_has_defaults_for_optional_columns():
    runs = Runs(params=[1e6, 2e6, 4e6], loss=[3.0, 2.9, 2.8])
    assert len(runs) == 3 and runs.groups == ["all"] and list(runs.name) == ["run1", "run2", "run3"]
    assert not runs.has("depth") and not runs.has("tokens") and runs.has("params")
    assert runs.profiles == [None] * 3 and list(runs.loss_unit) == [""] * 3
    assert runs.subset([0, 2]).params.tolist() == [1e6, 4e6]
    assert list(load_runs([{"N": 1e6, "loss": 3.0, "run": "a"}, {"N": 2e6, "loss": 2.9}]).name) == ["a", "run2"]
    with pytest.raises(ValueError, match="loss column is required"):
        Runs(params=[1e6])
    with pytest.raises(ValueError, match=r"column 'params' has 2 entries, expected 3"):
        Runs(params=[1e6, 2e6], loss=[3.0, 2.9, 2.8])


def test_law_columns_are_found_by_probing_the_law_so_user_laws_need_no_declaration():
    assert law_columns("kaplan") == ("params", "loss")
    assert law_columns("chinchilla") == ("params", "tokens", "loss")
    assert law_columns("depth_delusion", with_tokens=False) == ("depth", "width", "params", "loss")
    assert law_columns("depth_delusion") == ("depth", "width", "params", "tokens", "loss")
    # Constant tokens: the depth law's token term is dropped, chinchilla's cannot be.
    runs = Runs(depth=[2, 4, 8], width=[64, 64, 64], params=[1e6, 2e6, 4e6], loss=[3.0, 2.9, 2.8],
                tokens=[1e9] * 3)
    assert law_missing_columns("depth_delusion", runs) == []
    assert law_missing_columns("chinchilla", runs) == ["tokens"]
    with pytest.raises(ValueError, match="needs per-run token counts that vary"):
        check_law_columns("chinchilla", runs)


def test_a_misspelled_law_column_is_an_error_with_a_did_you_mean(tmp_path, capsys):
    """`tokenz` made `fit` fall back from chinchilla to kaplan without a word; `widht` from the
    depth law to chinchilla. A column that is not read and is close to the name or an alias of
    a law column the table lacks is an error: exit 2, naming the column and the one meant."""
    from depthdelusion.cli import main

    N, T, loss = chinchilla_rows()
    path = write_csv(tmp_path / "t.csv", ["params", "tokenz", "loss"], zip(N, T, loss))
    assert main(["fit", str(path), "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err
    assert "column 'tokenz' is not read: did you mean 'tokens'?" in err
    assert "--columns tokens=tokenz" in err
    rows = [{"depth": 4, "widht": 256, "params": n, "tokens": t, "loss": v} for n, t, v in zip(N, T, loss)]
    with pytest.raises(ValueError, match="column 'widht' is not read: did you mean 'width'"):
        load_runs(rows)
    with pytest.raises(ValueError, match="column 'Params' is not read: did you mean 'params'"):
        load_runs([{"Params": n, "loss": v} for n, v in zip(N, loss)])
    with pytest.raises(ValueError, match=r"no loss column .* Column 'Loss': did you mean 'loss'\?"):
        load_runs([{"params": n, "Loss": v} for n, v in zip(N, loss)])
    # mapped, it is read; with other columns named by --columns it is left unread, said loudly
    assert load_runs(path, columns={"tokens": "tokenz"}).has("tokens")
    named = load_runs(path, columns={"loss": "loss"})
    assert not named.has("tokens") and any("did you mean 'tokens'" in n for n in named.notes)
    assert main(["fit", str(path), "--bootstrap", "0", "--columns", "loss=loss"]) == 0
    assert "warning: " in capsys.readouterr().err


def test_a_misspelled_optional_column_is_a_warning_and_far_names_are_not_flagged():
    N, T, loss = chinchilla_rows(n=6)
    rows = [{"params": n, "tokens": t, "loss": v, "loss_sterr": 0.01, "lr": 3e-4, "seed": 1,
             "eval_loss": v, "dataset": "web", "params_convention": "total",
             "model": "llama-8b", "layer": "all"}  # text: no d_model, no layers
            for n, t, v in zip(N, T, loss)]
    runs = load_runs(rows)
    assert [n for n in runs.notes if "did you mean" in n] == [
        "list of runs: column 'loss_sterr' is not read: did you mean 'loss_stderr' (loss_se)? "
        "Rename it, or map it with --columns loss_se=loss_sterr"]

"""`depthdelusion spectrum RUN` on a tiny trained run: files, the streaming covariance against
numpy's, and the hidden states against an explicit forward pass."""
import csv

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from depthdelusion.cli import main
from depthdelusion.model import parametrization as pz
from depthdelusion.model import transformer
from depthdelusion.studies.common import spectrum
from depthdelusion.studies.spectrum import study as spectrum_study
from depthdelusion.studies.spectrum.options import SpectrumOptions

D, W, S = 2, 32, 32
TINY = ["--set", f"model.depth={D}", "--set", f"model.width={W}", "--set", "model.head_dim=16",
        "--set", f"model.seq_len={S}", "--set", "train.batch_size=8", "--set", "train.steps=2",
        "--set", "train.warmup_steps=1", "--set", "train.eval_batches=0"]
TOKENS, ROWS = 4096, 8  # 16 batches of 8 x 32 tokens, 8 groups of 2


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny"
    assert main(["train", *TINY, "--out", str(out)]) == 0
    assert main(["spectrum", str(out), "--tokens", str(TOKENS), "--rows", str(ROWS)]) == 0
    return out


@pytest.fixture(scope="module")
def loaded(run_dir):
    cfg, step, graphdef, params = spectrum.load_run(run_dir)
    return cfg, graphdef, params, spectrum.validation_tokens(cfg, TOKENS, ROWS)


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_writes_spectra_tail_table_and_figure(run_dir):
    out = run_dir / "spectrum"
    rows = _rows(out / "spectrum.csv")
    assert len(rows) == (D + 1) * W
    for layer in range(D + 1):
        eig = [float(r["eigenvalue"]) for r in rows if int(r["layer"]) == layer]
        assert [int(r["rank"]) for r in rows if int(r["layer"]) == layer] == list(range(1, W + 1))
        assert eig == sorted(eig, reverse=True) and eig[-1] > 0
    tail = _rows(out / "tail.csv")
    assert [int(r["layer"]) for r in tail] == list(range(D + 1))
    for r in tail:
        assert int(r["tokens"]) == TOKENS and int(r["top_k"]) == W // 2
        assert float(r["beta_lo"]) < float(r["beta"]) < float(r["beta_hi"])
        assert 2 == int(r["rank_lo"]) < int(r["rank_hi"]) <= W // 2
        assert 0 <= float(r["half_max_rel_diff"]) < 0.5
    assert "jackknife" in (out / "tail.md").read_text()
    assert (out / "spectrum.png").stat().st_size > 0


def test_streaming_covariance_equals_numpy_over_collected_hidden_states(run_dir, loaded):
    cfg, graphdef, params, batches = loaded
    collect = spectrum.forward_fn(graphdef, lambda x: x)
    hidden_LxNxW = np.concatenate([np.asarray(collect(params, b)).reshape(D + 1, -1, W)
                                   for b in batches], axis=1).astype(np.float64)
    assert hidden_LxNxW.shape == (D + 1, TOKENS, W)
    cov_LxWxW = np.stack([np.cov(h, rowvar=False) for h in hidden_LxNxW])
    moments = spectrum.total_moments(spectrum.group_moments(graphdef, params, batches, 8))
    assert moments.n == TOKENS
    # float32 within a batch of 256 tokens, float64 across batches: 1e-5 of the largest entry
    np.testing.assert_allclose(moments.covariance(), cov_LxWxW, rtol=0,
                               atol=1e-5 * np.abs(cov_LxWxW).max())
    # the command's spectrum.csv (6 significant digits) is numpy's eigenvalues of that covariance
    rows = _rows(run_dir / "spectrum" / "spectrum.csv")
    written_LxW = np.array([float(r["eigenvalue"]) for r in rows]).reshape(D + 1, W)
    np.testing.assert_allclose(written_LxW, np.linalg.eigvalsh(cov_LxWxW)[:, ::-1], rtol=1e-4)


def test_hidden_states_are_the_embeddings_and_each_blocks_output(loaded):
    cfg, graphdef, params, batches = loaded
    from flax import nnx

    mc = cfg.model

    @jax.jit
    def explicit(params, tokens_BxS):
        model = nnx.merge(graphdef, params)
        logits_BxSxV, hidden_LxBxSxW = model(tokens_BxS, hidden_fn=lambda x: x)
        x = model.embed[...][tokens_BxS]  # rope: no positional embedding is added
        streams = [x]
        for layer in range(D):
            x = transformer.block(x, {k: v[...][layer] for k, v in model.blocks.params.items()}, mc)
            streams.append(x)
        # the last stream, through the final norm and the head, is the model's logits
        final = {"final_norm_scale": model.final_norm_scale[...]}
        if mc.norm == "layernorm":
            final["final_norm_bias"] = model.final_norm_bias[...]
        h = transformer._norm(hidden_LxBxSxW[-1], final, "final_norm", mc.norm)
        logits = jnp.einsum("bsw,wv->bsv", h, model.head_kernel[...]) * pz.logit_multiplier(mc)
        if mc.use_bias:
            logits = logits + model.head_b[...]
        return logits_BxSxV, model(tokens_BxS), hidden_LxBxSxW, jnp.stack(streams), logits

    logits_BxSxV, plain_BxSxV, hidden_LxBxSxW, streams_LxBxSxW, from_last = explicit(
        params, jnp.asarray(batches[0][:, :-1]))
    np.testing.assert_array_equal(logits_BxSxV, plain_BxSxV)
    assert hidden_LxBxSxW.shape == (D + 1, ROWS, S, W)
    np.testing.assert_allclose(hidden_LxBxSxW, streams_LxBxSxW, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(from_last, logits_BxSxV, rtol=1e-5, atol=1e-5)


def test_bad_run_directory_is_one_clear_line(tmp_path, capsys):
    assert main(["spectrum", str(tmp_path)]) == 2
    assert "config.yaml" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit:  # refused by the parser, before any work
        main(["spectrum", str(tmp_path), "--tokens", "0"])
    assert exit.value.code == 2
    assert "argument --tokens: 0: must be an integer >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("arguments, says", [
    ({"rows": 0}, "--rows=0: must be a positive integer"),
    ({"tokens": "lots"}, "--tokens='lots': must be an integer"),
])
def test_a_bad_argument_of_the_command_function_is_one_line_naming_its_flag_before_any_work(
        tmp_path, monkeypatch, arguments, says):
    """The checks of the spec's fields, for a caller of the function the parser does not guard."""
    def measure(*args, **kwargs):
        raise AssertionError("the spectrum was measured before its arguments were checked")

    monkeypatch.setattr(spectrum, "measure", measure)
    with pytest.raises(ValueError) as err:
        spectrum_study.run_command(run=str(tmp_path), options=SpectrumOptions(**arguments))
    assert str(err.value) == says


def test_data_exponent_ridge_on_the_tiny_run(run_dir, loaded, tmp_path):
    # `depthdelusion data-exponent-ridge` in miniature (the study's code, on this module's run)
    out = tmp_path / "ridge"
    assert main(["data-exponent-ridge", str(run_dir), "--out", str(out), "--tokens", str(TOKENS),
                 "--rows", str(ROWS), "--n-min", "32", "--n-max", "1024", "--reps", "4",
                 "--seed", "3"]) == 0
    (row,) = _rows(out / "ridge.csv")
    cfg, graphdef, params, batches = loaded
    counts = np.bincount(np.concatenate([b[:, 1:].ravel() for b in batches]), minlength=cfg.model.vocab_size)
    assert int(row["target_token"]) == int(np.argmax(counts)) and row["target_rank"] == "1"
    assert (int(row["pool_tokens"]), int(row["width"]), row["reps"], row["seed"]) == (TOKENS, W, "4", "3")
    assert (int(row["n_min"]), int(row["n_max"]), int(row["n_points"])) == (32, 1024, 6)
    assert float(row["b_lo"]) <= float(row["b_measured"]) <= float(row["b_hi"])
    assert row["verdict"] in ("agrees", "disagrees", "cannot tell", "no prediction")
    if row["s"]:  # within the law (a > 1): b = (a − 1)/a with a = 1 + 2βs
        beta, s, b = (float(row[k]) for k in ("beta", "s", "b_pred"))
        assert b == pytest.approx(2 * beta * s / (2 * beta * s + 1), abs=2e-3)
    else:  # two training steps: the readout's power may decay no faster than 1/i
        assert row["verdict"] == "no prediction" and row["b_pred"] == ""
    assert float(row["b_fs_lo"]) <= float(row["b_fs"]) <= float(row["b_fs_hi"])
    assert float(row["b_fs_half_beta"]) < float(row["b_fs"]) < float(row["b_fs_double_beta"])
    assert row["verdict_finite_size"] in ("agrees", "disagrees", "cannot tell")
    curves = _rows(out / "curves.csv")
    assert [int(c["n"]) for c in curves] == [32, 64, 128, 256, 512, 1024]
    text = (out / "ridge.md").read_text()
    assert "depthdelusion data-exponent-ridge" in text and "--seed 3" in text and "wall time" in text
    assert "Finite-size prediction" in text


def test_data_exponent_ridge_bad_grid_is_one_clear_line(run_dir, tmp_path, capsys):
    assert main(["data-exponent-ridge", str(run_dir), "--out", str(tmp_path), "--n-min", "64",
                 "--n-max", "128"]) == 2
    assert "--n-max=128" in capsys.readouterr().err

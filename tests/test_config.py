import pytest

from depthdelusion.config import Config, ModelConfig, load_config, parse_override


def test_defaults_are_the_paper_recipe():
    cfg = load_config()
    assert (cfg.train.beta1, cfg.train.beta2, cfg.train.lr) == (0.9, 0.95, 3e-4)
    assert (cfg.train.weight_decay, cfg.train.grad_clip, cfg.train.warmup_steps) == (0.1, 1.0, 2000)
    assert cfg.train.batch_size * cfg.model.seq_len == 262_144
    assert cfg.model.heads == cfg.model.width // 64


def test_yaml_then_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  depth: 3\n  width: 256\ntrain:\n  lr: 1.0e-3\n")
    cfg = load_config(path, ["model.depth=24", "train.steps=1000", "model.ffn=swiglu", "train.lr=2e-3"])
    assert (cfg.model.depth, cfg.model.width, cfg.train.steps) == (24, 256, 1000)
    assert cfg.model.ffn == "swiglu" and cfg.train.lr == 2e-3


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.width=100", "model.width=100 is not divisible by model.head_dim=64"),
        ("model.depth=0", "model.depth=0: must be a positive integer"),
        ("model.ffn=relu", "model.ffn='relu': valid values are gelu, swiglu"),
        ("model.norm=batchnorm", "model.norm='batchnorm': valid values are layernorm, rmsnorm"),
        ("model.positions=alibi", "valid values are rope, learned"),
        ("model.remat=some", "valid values are none, full, save_dots"),
        ("model.depth=deep", "model.depth='deep': must be an integer"),
        ("model.use_bias=3", "model.use_bias=3: must be true or false"),
        ("model.dept=3", "unknown config field 'model.dept': valid fields of model are depth"),
        ("optim.lr=3", "unknown config section 'optim'"),
        ("train.lr_min_ratio=2", "train.lr_min_ratio=2.0: must be in [0, 1]"),
        ("mesh.data=0", "mesh.data=0"),
        ("depth", "expected KEY=VALUE"),
    ],
)
def test_bad_values_name_the_field_and_valid_values(override, message):
    with pytest.raises(ValueError) as err:
        load_config(None, [override])
    assert message in str(err.value)


def test_yaml_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model: [1, 2\n")
    with pytest.raises(ValueError, match="bad.yaml: not valid YAML"):
        load_config(path)
    path.write_text("model:\n  heads: 8\n")
    with pytest.raises(ValueError, match="unknown config field 'model.heads'"):
        load_config(path)
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        load_config(tmp_path / "missing.yaml")


def test_swiglu_hidden_size_is_a_multiple_of_64_near_8w_over_3():
    cfg = ModelConfig(width=512, ffn="swiglu")
    assert cfg.ffn_dim % 64 == 0 and abs(cfg.ffn_dim - 8 * 512 / 3) < 64
    assert ModelConfig(width=512).ffn_dim == 2048


def test_parse_override_reads_yaml_scalars():
    assert load_config(None, ["train.lr=3e-4"]).train.lr == 3e-4  # YAML 1.1 reads 3e-4 as a string
    assert parse_override("model.use_bias=false") == ("model.use_bias", False)
    assert parse_override("model.vocab_size=null") == ("model.vocab_size", None)
    assert Config().validate() is not None


def test_no_tuple_in_config_repeats_a_literal_field_type():
    """A field's valid values are written once, in its Literal type; a module constant listing
    them must be that type's own args, not a copy that can drift."""
    import dataclasses
    import typing

    from depthdelusion import config

    choices = {}
    for section in (config.ModelConfig, config.DataConfig, config.TrainConfig, config.MeshConfig):
        for field in dataclasses.fields(section):
            hint = typing.get_type_hints(section)[field.name]
            if typing.get_origin(hint) is typing.Literal:
                choices[frozenset(typing.get_args(hint))] = typing.get_args(hint)
    copies = [name for name, value in vars(config).items()
              if isinstance(value, tuple) and frozenset(value) in choices and value is not choices[frozenset(value)]]
    assert not copies, f"config.py constants repeating a Literal field type: {copies}"
    assert config.PARAMETRIZATIONS == ("sp", "mup", "depth_mup", "completep")


def test_valid_ranges_are_declared_on_the_fields_and_checked_from_there():
    import dataclasses

    from depthdelusion.config import DataConfig, TrainConfig

    bounded = {f"{section}.{f.name}": f.metadata["bounds"]
               for section, cls in (("model", ModelConfig), ("data", DataConfig), ("train", TrainConfig))
               for f in dataclasses.fields(cls) if "bounds" in f.metadata}
    assert {"model.depth", "model.vocab_size", "model.init_std", "data.workers", "train.lr",
            "train.beta2", "train.lr_min_ratio", "train.eps", "train.grad_accum_steps"} <= set(bounded)
    for key, b in bounded.items():  # just outside each declared end: an error naming the field
        outside = [b["ge"] - 1 if b["ge"] is not None else None, b["gt"],
                   b["le"] + 1 if b["le"] is not None else None, b["lt"]]
        for value in (v for v in outside if v is not None):
            with pytest.raises(ValueError, match=rf"^{key}={value:g}(\.0)?: must be "):
                load_config(None, [f"{key}={value}"])
    with pytest.raises(ValueError, match=r"train.beta1=1.0: must be in \[0, 1\)$"):
        load_config(None, ["train.beta1=1"])
    with pytest.raises(ValueError, match=r"train.watchdog_minutes=-1.0: must be >= 0 \(0 = off\)$"):
        load_config(None, ["train.watchdog_minutes=-1"])


def test_the_vocabulary_is_the_tokenizers_once_the_config_is_loaded():
    assert load_config().model.vocab_size == 257  # bytes
    assert load_config(None, ["data.tokenizer=gpt2"]).model.vocab_size == 50257
    assert load_config(None, ["model.vocab_size=300"]).model.vocab_size == 300  # room to spare: kept
    with pytest.raises(ValueError, match=r"model.vocab_size=100 is smaller than the bytes tokenizer's"):
        load_config(None, ["model.vocab_size=100"])
    cfg = Config()  # built in code: validating it sets the vocabulary the same way
    assert cfg.model.vocab_size is None and cfg.validate().model.vocab_size == 257


def test_a_yaml_file_that_does_not_parse_is_named_with_its_line_and_column(tmp_path):
    """config.read_yaml, the one reader of YAML files (tests/architecture/test_file_format_owners.py)."""
    from depthdelusion.config import read_yaml

    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [1,\n")
    with pytest.raises(ValueError, match=r"bad\.yaml: not valid YAML \(line 2, column 1\): expected the node content"):
        read_yaml(bad)


def test_an_empty_config_file_is_refused_saying_what_it_should_hold(tmp_path):
    # Read as defaults, an empty file would train at the paper's scale (hundreds of GB).
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    with pytest.raises(ValueError, match=r"empty\.yaml: the config file is empty; it should hold "
                       r"the sections model, data, train, mesh.*quickstart"):
        load_config(str(empty))


def test_train_refuses_an_empty_config_with_exit_2(tmp_path, capsys):
    from depthdelusion import cli, exit_codes

    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert cli.main(["train", str(empty), "--out", str(tmp_path / "run")]) == exit_codes.USAGE
    assert "the config file is empty" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()

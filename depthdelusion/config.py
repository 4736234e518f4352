"""Run configuration: dataclasses for the model, data, training recipe and device mesh.

A run is configured by a YAML file with the sections `model`, `data`, `train`, `mesh`, then
dotted overrides (`--set model.depth=24`). Every value is checked against its field's type and
valid range; a bad value raises a ValueError naming the field and what would be valid.
The defaults are the Depth Delusion paper's training recipe except where noted.
"""
from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from typing import Any, Literal, get_args, get_origin

import yaml

Parametrization = Literal["sp", "mup", "depth_mup", "completep"]
PARAMETRIZATIONS = get_args(Parametrization)  # for commands that take a list of them


def bounded(default, *, ge=None, gt=None, le=None, lt=None, note: str = ""):
    """A field whose valid range is declared with it (``ge``: >=, ``gt``: >, ``le``: <=,
    ``lt``: <); ``Config.validate`` checks every such field through :func:`check_bounds`."""
    return dataclasses.field(default=default, metadata={"bounds": {"ge": ge, "gt": gt, "le": le, "lt": lt},
                                                        "note": note})


def _bounds_text(bounds: dict, integer: bool) -> str:
    """What a bounded field must be, in words ("a positive integer", ">= 0", "in [0, 1)")."""
    lo = (f"[{bounds['ge']:g}" if bounds["ge"] is not None else
          f"({bounds['gt']:g}" if bounds["gt"] is not None else None)
    hi = (f"{bounds['le']:g}]" if bounds["le"] is not None else
          f"{bounds['lt']:g})" if bounds["lt"] is not None else None)
    if lo and hi:
        return f"in {lo}, {hi}"
    if integer and bounds["ge"] == 1 and not hi:
        return "a positive integer"
    return (f">= {bounds['ge']:g}" if bounds["ge"] is not None else f"> {bounds['gt']:g}" if lo else
            f"<= {bounds['le']:g}" if bounds["le"] is not None else f"< {bounds['lt']:g}")


def check_bounds(section_obj: Any, section: str) -> None:
    """Every field declared with :func:`bounded`: a ValueError naming the first one out of its
    range as SECTION.FIELD (FIELD alone when ``section`` is empty; null passes where the field
    allows it). Run configs and study specs (studies/common/spec.py) both check their fields here."""
    hints = typing.get_type_hints(type(section_obj))
    for f in dataclasses.fields(section_obj):
        bounds = f.metadata.get("bounds")
        value = getattr(section_obj, f.name)
        if bounds is None or value is None:
            continue
        ok = ((bounds["ge"] is None or value >= bounds["ge"]) and (bounds["gt"] is None or value > bounds["gt"])
              and (bounds["le"] is None or value <= bounds["le"]) and (bounds["lt"] is None or value < bounds["lt"]))
        if not ok:
            nullable = type(None) in get_args(hints[f.name])
            integer = int in (hints[f.name], *get_args(hints[f.name]))
            where = f"{section}.{f.name}" if section else f.name
            raise ValueError(f"{where}={value}: must be {_bounds_text(bounds, integer)}"
                             + (" or null" if nullable else "") + f.metadata["note"])


@dataclasses.dataclass
class ModelConfig:
    """Decoder-only Pre-LN transformer. W = width, D = depth, H = width / head_dim heads."""

    depth: int = bounded(16, ge=1)  # D, number of transformer blocks
    width: int = bounded(512, ge=1)  # W, residual stream width
    head_dim: int = bounded(64, ge=1)  # per-head dimension; heads = width / head_dim
    ffn: Literal["gelu", "swiglu"] = "gelu"
    # FFN hidden size F; None means 4W for gelu and 8W/3 rounded up to a multiple of 64 for swiglu
    # (same parameter count to within rounding).
    ffn_hidden: int | None = bounded(None, ge=1)
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    positions: Literal["rope", "learned"] = "rope"
    rope_base: float = 10000.0
    # None: the data's tokenizer's, set by Config.validate() (which loading a config runs).
    vocab_size: int | None = bounded(None, ge=2, note=" (null: from the tokenizer)")
    seq_len: int = bounded(1024, ge=1)
    use_bias: bool = True  # biases of the linear layers and the LM head (LayerNorm keeps its own)
    init_std: float = bounded(0.02, gt=0)
    param_dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    # "auto": bfloat16 on accelerators, float32 on CPU (where bf16 matmuls are emulated, slowly).
    compute_dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    remat: Literal["none", "full", "save_dots"] = "none"
    # jax.nn.dot_product_attention implementation. "auto": cuDNN flash attention on GPU when the
    # compute dtype is bf16/fp16 and head_dim <= 128 (a multiple of 8), else XLA (always on CPU/TPU).
    # "splash": the Pallas splash-attention kernel, TPU only (seq_len a multiple of 128).
    attention: Literal["auto", "xla", "cudnn", "splash"] = "auto"
    # Hyperparameter-transfer parameterization (docs/parametrization.md): init, forward multipliers
    # and per-group AdamW lr / wd / eps scale with m_N = width / base_width, m_L = depth / base_depth.
    parametrization: Parametrization = "sp"
    base_width: int = bounded(256, ge=1)  # the width at which lr, init_std, wd and eps were tuned
    base_depth: int = bounded(2, ge=1)  # the depth at which they were tuned
    # dtype of the residual stream (the scan carry, the sum of every block's output) and of the
    # logits' accumulation: "float32" keeps them in float32 under bf16/fp16 compute (the matmuls
    # stay in the compute dtype); "compute" keeps them in the compute dtype. Identical on CPU,
    # where compute is float32. Default "compute": at 32 blocks a float32 carry changed neither
    # the loss nor the gradient profile measurably (docs/persistence.md), and it costs memory.
    residual_dtype: Literal["float32", "compute"] = "compute"

    @property
    def heads(self) -> int:
        return self.width // self.head_dim

    @property
    def ffn_dim(self) -> int:
        if self.ffn_hidden is not None:
            return self.ffn_hidden
        if self.ffn == "gelu":
            return 4 * self.width
        return -(-8 * self.width // 3 // 64) * 64

    def validate(self) -> None:
        check_bounds(self, "model")
        if self.width % self.head_dim:
            raise ValueError(
                f"model.width={self.width} is not divisible by model.head_dim={self.head_dim}: "
                f"choose a width that is a multiple of {self.head_dim} (e.g. "
                f"{max(self.head_dim, self.width // self.head_dim * self.head_dim)})"
            )
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(f"model.head_dim={self.head_dim}: rope needs an even head_dim")


BUILTIN_ZIPF_MAX = 4.0  # beyond it the top word takes > 92% of every part of speech: no lexicon left


def check_builtin_zipf(zipf, where: str = "zipf") -> float:
    """The built-in corpus' Zipf exponent as a float, or a ValueError naming ``where`` and the
    valid range."""
    if isinstance(zipf, bool) or not isinstance(zipf, (int, float)) or not 0 <= zipf <= BUILTIN_ZIPF_MAX:
        default = DataConfig.builtin_zipf_exponent
        raise ValueError(f"{where}={zipf!r}: the built-in corpus' Zipf exponent must be a number in "
                         f"[0, {BUILTIN_ZIPF_MAX:g}] (0: every word equally likely; default {default})")
    return float(zipf)


@dataclasses.dataclass
class DataConfig:
    """Where tokens come from (see depthdelusion/data/pipeline.py)."""

    # A SlimPajama root, a directory from `depthdelusion prepare-data`, or .jsonl(.zst) / .txt
    # files (file, directory or glob); local or gs://. None: the built-in generated corpus.
    path: str | None = None
    format: Literal["auto", "slimpajama", "arrayrecord", "jsonl", "text"] = "auto"
    tokenizer: Literal["bytes", "gpt2"] = "bytes"
    seed: int = 42  # data order (and which built-in documents are drawn)
    epochs: int = bounded(1, ge=1)  # passes over the data; 1 = no sequence is ever repeated
    workers: int = bounded(0, ge=0)  # grain worker processes (tokenization in parallel); 0 = in-process
    prefetch: int = bounded(4, ge=0)  # batches prepared ahead by a background thread when workers = 0
    holdout_files: int = bounded(0, ge=0)  # jsonl/text without a validation split: hold out the last N files
    builtin_documents: int = bounded(30_000, ge=1)  # size of the built-in corpus (~660 bytes per document)
    # data.path=tfds:NAME[:CONFIG] reads the TFDS dataset prepared under this directory (local or
    # gs://; None: $TFDS_DATA_DIR or ~/tensorflow_datasets); nothing is downloaded at run time.
    tfds_dir: str | None = None
    tfds_text_feature: str = "text"  # the TFDS text feature holding the documents ('a/b' if nested)
    # The built-in corpus' redundancy knob: word frequency ∝ 1/rank^z in its lexicon, z in [0, 4].
    # Steeper (larger z) repeats the top words more; 1.1 is the corpus every result was trained on.
    builtin_zipf_exponent: float = 1.1

    def validate(self) -> None:
        check_bounds(self, "data")
        check_builtin_zipf(self.builtin_zipf_exponent, "data.builtin_zipf_exponent")
        if self.path is not None and self.builtin_zipf_exponent != DataConfig.builtin_zipf_exponent:
            # the knob would be ignored, and the run's config.yaml would name a corpus it never read
            raise ValueError(f"data.builtin_zipf_exponent={self.builtin_zipf_exponent:g} shapes the built-in "
                             f"corpus only, but data.path={self.path!r} is set: unset data.path or drop "
                             "the setting")


@dataclasses.dataclass
class TrainConfig:
    """The optimisation recipe: AdamW with warmup + cosine decay and global-norm clipping."""

    steps: int = bounded(24414, ge=1)  # 6.4B tokens at 256 x 1024 tokens per step
    batch_size: int = bounded(256, ge=1)  # global batch, sequences
    lr: float = bounded(3e-4, gt=0)  # peak learning rate
    warmup_steps: int = bounded(2000, ge=0)
    lr_min_ratio: float = bounded(0.1, ge=0, le=1)  # cosine decays to lr * lr_min_ratio
    beta1: float = bounded(0.9, ge=0, lt=1)
    beta2: float = bounded(0.95, ge=0, lt=1)
    eps: float = bounded(1e-8, gt=0)
    weight_decay: float = bounded(0.1, ge=0)  # decoupled; matrices and embeddings only, never norms or biases
    grad_clip: float = bounded(1.0, ge=0)  # global-norm clipping; 0 disables
    seed: int = 42  # parameter init
    log_every: int = bounded(1, ge=1)  # loss, lr and global grad norm are logged every this many steps
    layer_stats_every: int = bounded(100, ge=1)  # per-layer weight / activation-gradient norms, tokens/s, MFU
    eval_every: int = bounded(1000, ge=1)  # validation loss every this many steps and at the end
    eval_batches: int = bounded(8, ge=0)  # validation batches per evaluation (the same each time); 0 = none
    checkpoint_every: int = bounded(1000, ge=0)  # steps between checkpoints; 0 = by time only
    checkpoint_minutes: float = bounded(30.0, ge=0)  # minutes between checkpoints; 0 = by steps only
    keep_checkpoints: int = bounded(3, ge=1)  # the newest K are kept
    # A step whose loss or gradient is not finite never updates the parameters; then
    # "stop" ends the run with an error (the last checkpoint stays good), "skip" goes on.
    nonfinite: Literal["stop", "skip"] = "stop"
    # The run ends (every host, status 1) when its step has not advanced for this long: a hung
    # collective or data read; tpu/babysit.sh then resumes it. 0 = off. Covers compilation too.
    watchdog_minutes: float = bounded(30.0, ge=0, note=" (0 = off)")
    # The global batch is split into this many microbatches whose gradients are averaged before
    # one update (the same numbers as the whole batch at once, in less activation memory).
    grad_accum_steps: int = bounded(1, ge=1)
    # "START-STOP": a jax.profiler trace of steps START through STOP into <out>/profile/.
    profile_steps: str | None = None
    # Where the scalars go besides metrics.jsonl (always written): any of jsonl, tensorboard,
    # wandb, mlflow (train/trackers.py; wandb and mlflow need the `trackers` extra).
    trackers: list[str] = dataclasses.field(default_factory=lambda: ["jsonl", "tensorboard"])

    def profile_range(self) -> tuple[int, int] | None:
        """(START, STOP) of `profile_steps`, both included; None when not profiling."""
        if self.profile_steps is None:
            return None
        match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", self.profile_steps)
        if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
            raise ValueError(f"train.profile_steps={self.profile_steps!r}: expected \"START-STOP\" with "
                             "1 <= START <= STOP, e.g. \"10-20\" (steps 10 through 20)")
        return int(match.group(1)), int(match.group(2))

    def validate(self) -> None:
        check_bounds(self, "train")
        if self.batch_size % self.grad_accum_steps:
            raise ValueError(f"train.batch_size={self.batch_size} is not divisible by "
                             f"train.grad_accum_steps={self.grad_accum_steps}")
        check_trackers(self.trackers)
        if (profile := self.profile_range()) and profile[1] > self.steps:
            raise ValueError(f"train.profile_steps={self.profile_steps!r}: STOP must be <= "
                             f"train.steps={self.steps}")


@dataclasses.dataclass
class MeshConfig:
    """Device mesh (data, fsdp, tensor). -1 means "all remaining devices" (at most one axis)."""

    data: int = -1
    fsdp: int = 1
    tensor: int = 1

    def validate(self) -> None:
        sizes = {"data": self.data, "fsdp": self.fsdp, "tensor": self.tensor}
        for name, size in sizes.items():
            if size == 0 or size < -1:
                raise ValueError(f"mesh.{name}={size}: must be a positive integer or -1 (all remaining)")
        if sum(size == -1 for size in sizes.values()) > 1:
            raise ValueError("mesh: at most one of data, fsdp, tensor may be -1")


@dataclasses.dataclass
class Config:
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    mesh: MeshConfig = dataclasses.field(default_factory=MeshConfig)

    def validate(self, *, reads_data: bool = True) -> "Config":
        """Check every field and complete the one that depends on another section: a null
        model.vocab_size becomes the tokenizer's vocabulary (a set one must hold every id of the
        tokenizer, unless ``reads_data`` is False: bench and plans feed random token ids). Every
        config is validated once it is read (`load_config`, a sweep's grid, a study's runs) or
        before it is used (the trainer, bench, plans); returns self."""
        self.model.validate()
        self.data.validate()
        self.train.validate()
        self.mesh.validate()
        if reads_data or self.model.vocab_size is None:
            self.model.vocab_size = _vocab_size(self)
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)



#: Tracker name -> the module it needs (None: built in); the trackers live in train/trackers.py.
TRACKER_MODULES = {"jsonl": None, "tensorboard": "tensorboardX", "wandb": "wandb", "mlflow": "mlflow"}


def check_trackers(names: list[str]) -> None:
    """An unknown tracker, or one whose library is not installed, is a config error."""
    import importlib.util

    for name in names:
        if name not in TRACKER_MODULES:
            raise ValueError(f"train.trackers: unknown tracker {name!r}; valid: {', '.join(TRACKER_MODULES)}")
        module = TRACKER_MODULES[name]
        if module is not None and importlib.util.find_spec(module) is None:
            raise ValueError(f"train.trackers names {name!r}, but {module} is not installed: "
                             f"pip install 'depthdelusion[trackers]' (or drop {name!r})")


def _section_class(section: str) -> type:
    hints = typing.get_type_hints(Config)
    if section not in hints:
        raise ValueError(f"unknown config section {section!r}: valid sections are {', '.join(hints)}")
    return hints[section]


def coerce_value(where: str, annotation: Any, value: Any) -> Any:
    """Check `value` against a field annotation; ints are accepted where floats are expected."""
    origin = get_origin(annotation)
    if origin is Literal:
        choices = get_args(annotation)
        if value not in choices:
            raise ValueError(f"{where}={value!r}: valid values are {', '.join(map(str, choices))}")
        return value
    if origin in (typing.Union, types.UnionType):
        options = get_args(annotation)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return coerce_value(where, option, value)
            except ValueError as err:
                errors.append(str(err))
        raise ValueError(errors[0] if errors else f"{where}={value!r}: invalid")
    if origin is list:  # a YAML list, or one comma-separated string (handy with --set)
        (item,) = get_args(annotation)
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list):
            raise ValueError(f"{where}={value!r}: must be a list, e.g. [a, b] or \"a,b\"")
        return [coerce_value(f"{where}[{i}]", item, v) for i, v in enumerate(value)]
    if annotation is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}={value!r}: must be true or false")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}={value!r}: must be an integer")
        return value
    if annotation is float:
        if isinstance(value, str):  # YAML 1.1 reads "3e-4" (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}={value!r}: must be a number")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}={value!r}: must be a string")
        return value
    raise TypeError(f"unsupported annotation {annotation!r} for {where}")


def set_field(cfg: Config, dotted: str, value: Any) -> None:
    """cfg.SECTION.FIELD = value, parsed to the field's type (a clear error naming the key)."""
    parts = dotted.split(".")
    if len(parts) != 2:
        raise ValueError(f"config key {dotted!r}: expected SECTION.FIELD, e.g. model.depth")
    section, name = parts
    section_cls = _section_class(section)
    hints = typing.get_type_hints(section_cls)
    if name not in hints:
        raise ValueError(
            f"unknown config field {dotted!r}: valid fields of {section} are {', '.join(hints)}"
        )
    setattr(getattr(cfg, section), name, coerce_value(dotted, hints[name], value))


def from_dict(raw: dict[str, Any], source: str = "config") -> Config:
    """Build a Config from nested dicts (as read from YAML); unknown keys are errors."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: expected a mapping with sections model, data, train, mesh")
    cfg = Config()
    for section, fields in raw.items():
        _section_class(section)
        if fields is None:
            continue
        if not isinstance(fields, dict):
            raise ValueError(f"{source}: section {section!r} must be a mapping of field: value")
        for name, value in fields.items():
            set_field(cfg, f"{section}.{name}", value)
    return cfg


def parse_override(text: str) -> tuple[str, Any]:
    """`model.depth=24` -> ("model.depth", 24); values are parsed as YAML scalars."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--set {text!r}: expected KEY=VALUE, e.g. --set model.depth=24")
    return key.strip(), parse_scalar(value)


def parse_scalar(text: str) -> Any:
    """A command-line value as a YAML scalar, as `--set` reads it (`24` -> 24, `3e-4` -> "3e-4",
    which `coerce_value` reads as a float, `sp` -> "sp"); empty -> None."""
    return yaml.safe_load(text) if text.strip() else None


def read_yaml(path):
    """The parsed YAML file at ``path`` (local or gs://, an epath.Path or a str), read with
    yaml.safe_load; invalid YAML is a one-line ValueError naming the file, the line and the
    column. The one YAML file reader: configs, sweep grids, study experiments, a run's config.yaml."""
    from etils import epath

    path = epath.Path(path)
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"{path}: not valid YAML{where}: {problem}") from None


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read a YAML config (local or gs://, or start from defaults), apply `section.field=value`
    overrides, validate (which sets a null vocab_size from the tokenizer)."""
    raw: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        from etils import epath

        path = epath.Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {path}")
        source = str(path)
        raw = read_yaml(path)
        if raw is None:  # empty (or comments only): the defaults are the paper's scale, not a start
            raise ValueError(f"{path}: the config file is empty; it should hold the sections model, "
                             "data, train, mesh (e.g. depthdelusion/presets/quickstart.yaml), or "
                             f"name a preset instead: {', '.join(PRESETS)}")
    cfg = from_dict(raw, source)
    for text in overrides:
        key, value = parse_override(text)
        set_field(cfg, key, value)
    return cfg.validate()


def _vocab_size(cfg: Config) -> int:
    """model.vocab_size, a null one the tokenizer's vocabulary (data/tokenizers.py)."""
    from depthdelusion.data.tokenizers import vocab_size

    tokenizer_vocab = vocab_size(cfg.data.tokenizer)
    if cfg.model.vocab_size is None:
        return tokenizer_vocab
    if cfg.model.vocab_size < tokenizer_vocab:
        raise ValueError(
            f"model.vocab_size={cfg.model.vocab_size} is smaller than the {cfg.data.tokenizer} "
            f"tokenizer's vocabulary ({tokenizer_vocab}): use >= {tokenizer_vocab} or null")
    return cfg.model.vocab_size


#: Config files shipped in the package (depthdelusion/presets/NAME.yaml), usable by name.
PRESETS = ("quickstart",)
DEFAULT_PRESET = "quickstart"


def resolve_config_path(config: str | None):
    """A YAML path (local or gs://, as an epath.Path), or the file of a preset named in
    :data:`PRESETS` (default: :data:`DEFAULT_PRESET`)."""
    from importlib import resources

    from etils import epath

    name = config or DEFAULT_PRESET
    if name in PRESETS:
        return epath.Path(str(resources.files("depthdelusion") / "presets" / f"{name}.yaml"))
    return epath.Path(name)

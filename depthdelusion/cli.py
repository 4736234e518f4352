"""The one command-line entry point: every command's arguments are parsed here, nowhere else.

A command is a row of :data:`COMMANDS`: its name, its one-line help, and the plain function that
runs it ("module:function", keyword arguments named like the parser's destinations, returning an
exit code of :mod:`depthdelusion.exit_codes`), plus a function below that defines its arguments.
The module is imported only when its command runs, so ``depthdelusion --help``, the help of
``train``, ``sweep`` and the analysis commands, and the analysis commands themselves never import
JAX. An option whose default belongs to the library (``LIBRARY_DEFAULT``) takes the function's
default; only the help of such a command imports its module, to show that default. To add a
command: write the function in the module that owns the job, add a row to :data:`COMMANDS` and
an ``@_arguments("name")`` function.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import inspect
import sys
from typing import Callable

from depthdelusion import exit_codes
from depthdelusion.outputs import unwritable

#: (command, "module:function" that runs it, one-line help), in listing order.
COMMANDS = (
    ("train", "depthdelusion.train.commands:run_train",
     "train one model; writes config.yaml, metrics.jsonl, summary.json"),
    ("prepare-data", "depthdelusion.data.commands:run_prepare",
     "tokenize and pack a corpus into ArrayRecord shards for fast, exactly resumable training"),
    ("sweep", "depthdelusion.sweep_commands:run_sweep_command",
     "run an experiment grid (idempotent), then write runs.csv and the report"),
    ("plan", "depthdelusion.sweep_commands:run_plan_command",
     "compile the train step for a TPU slice on this host; per-chip HBM, fits or not"),
    ("sky-jobs", "depthdelusion.skypilot_jobs:run_sky_jobs",
     "a grid as SkyPilot managed jobs, one TPU slice per run (spot, reserved or best-effort)"),
    ("bench", "depthdelusion.train.commands:run_bench",
     "compile time, step time, tokens/s, MFU and peak memory of the train step"),
    ("coord-check", "depthdelusion.studies.coord_check.study:run_command",
     "RMS of every block's output and the logits over the first steps, per shape"),
    ("lr-transfer", "depthdelusion.studies.lr_transfer.study:run_command",
     "lr sweep per width x depth and parameterization, then a depth sweep; CSV, PNG, report"),
    ("depth-confound", "depthdelusion.studies.depth_confound.report:run_command",
     "SP at one lr vs SP tuned per shape vs CompleteP transferred, per depth x width; report"),
    ("public-shapes", "depthdelusion.studies.public_shapes.report:run_command",
     "the critical-depth law tested on the Gemstones suite (tables by name); report.md, CSVs"),
    ("depth-vs-size", "depthdelusion.studies.depth_vs_size.report:run_command",
     "depth traded against width at fixed non-embedding parameters and tokens; report"),
    ("report", "depthdelusion.analysis.commands:run_report",
     "fit the laws and write the analysis report (md, tex, csv, png); no JAX needed"),
    ("fit", "depthdelusion.analysis.commands:run_fit",
     "fit one law to a table of runs and print its summary; no JAX needed"),
    ("shape", "depthdelusion.analysis.shape_command:run_shape",
     "how deep and how wide for C FLOPs: the optimum and the band of near-optimal shapes, pooled "
     "over tables (suites), with intervals"),
    ("isoflop", "depthdelusion.analysis.commands:run_isoflop",
     "isoFLOP profiles (Approach 2): N*(C), D*(C) exponents with intervals, the method's bias on "
     "this grid"),
    ("runs", "depthdelusion.analysis.table.run_table:run_command",
     "runs export: one run table (docs/run_table.md) from run directories, MLflow or W&B"),
    ("tables", "depthdelusion.analysis.tables_command:run_tables",
     "published run tables by name: list, show (provenance, license), get (downloaded, as a run table)"),
    ("laws", "depthdelusion.analysis.commands:run_laws",
     "list the registered laws: formulas and the columns each needs"),
    ("persistence", "depthdelusion.analysis.commands:run_persistence",
     "gradient persistence length per run and ℓ(W)"),
    ("audit", "depthdelusion.analysis.commands:run_audit",
     "check parameter counts against depth and width"),
    ("expand", "depthdelusion.studies.expansion.commands:run_expand",
     "insert zero-output blocks into a trained run (new run directory), or --probe the "
     "first-order signal per insertion layer"),
    ("expansion-study", "depthdelusion.studies.expansion.commands:run_expansion_study",
     "the depth-expansion study: train (resumable), grow, probe, tables and figures"),
    ("expansion-prediction", "depthdelusion.studies.expansion.commands:run_expansion_prediction",
     "does the probe's signal rank insertion points as training each child does? (Spearman, seeds)"),
    ("expansion-growth", "depthdelusion.studies.expansion.commands:run_expansion_growth",
     "growth against a compute-matched from-scratch baseline, lrs tuned per arm, seeds"),
    ("persistence-probe", "depthdelusion.studies.persistence.probe:run_command",
     "per-layer gradient profiles at init and over the first steps for a width x depth grid; ℓ per shape"),
    ("persistence-study", "depthdelusion.studies.persistence.study:run_command",
     "tables and figures of the persistence study from its trained runs"),
    ("spectrum", "depthdelusion.studies.spectrum.study:run_command",
     "eigenvalue spectra of a trained run's residual stream per layer, with tail indices"),
    ("redundancy-study", "depthdelusion.studies.redundancy.study:run_command",
     "synthetic check of the redundancy law (ridge regression on power-law spectra); numpy only"),
    ("data-exponent", "depthdelusion.studies.data_exponent.study:run_data_exponent",
     "token sweeps' measured data exponent vs the one predicted from spectra and the LM head"),
    ("data-exponent-ridge", "depthdelusion.studies.data_exponent.ridge:run_command",
     "ridge readouts on a trained run's frozen features: data exponent vs its spectrum's and wrong ones"),
)

EPILOG = f"""exit codes:
  {exit_codes.OK:<3} done
  {exit_codes.FAILED:<3} the command ran and the answer is no: a sweep or lr-transfer with failed runs,
      a plan that does not fit
  {exit_codes.USAGE:<3} bad command line, configuration or input: one line on stderr names the flag,
      field or file, and what would be valid
  {exit_codes.PREEMPTED:<3} preempted (SIGTERM): the state is saved; run the same command again to resume
  {exit_codes.INTERRUPTED:<3} interrupted (Ctrl-C): one line, no traceback; a report is written whole or not at all
"""

RUNS_HELP = ("a directory of run directories (searched for summary.json), a CSV with the columns "
             "the law needs (params,loss; params,tokens,loss; depth,width,params[,tokens],loss; "
             "aliases: `depthdelusion laws --columns`), or 'paper' for the bundled data of the "
             "Depth Delusion paper")
PARAMS_CHOICES = ("total", "nonembedding", "non_embedding", "recomputed")
PARAMS_HELP = ("nonembedding: Kaplan's, every vocabulary matrix the total counts removed (both "
               "input embedding and LM head when untied; from the table's registration, `tables "
               "show NAME`, or its params_non_embedding column); non_embedding: the table's own "
               "params_non_embedding column as given (Gemstones: the authors' count, the LM head "
               "still in), else D·(12W² + 13W)")
COLUMNS_HELP = ("read these table columns as the canonical ones, e.g. loss=val_loss,params=N "
                "(`depthdelusion laws --columns` lists names and aliases)")
LIBRARY_DEFAULT = argparse.SUPPRESS  # absent: the command function's own default applies

_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {}
_DESCRIPTIONS: dict[str, str] = {}


def _arguments(command: str, description: str | None = None):
    """Register the function that defines `command`'s arguments (and its long description)."""
    def register(define):
        _ARGUMENTS[command] = define
        if description:
            _DESCRIPTIONS[command] = description
        return define
    return register


def add_set(parser: argparse.ArgumentParser, help: str = "override a config field by its dotted "
            "path, e.g. --set model.depth=24 (repeatable)") -> None:
    """The one ``--set KEY=VALUE`` option (repeatable; the function gets ``overrides``)."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help=help)


def add_out(parser: argparse.ArgumentParser, help: str = "output directory", required: bool = True,
            metavar: str = "DIR") -> None:
    """The one ``--out`` option, a directory (``DIR``) or a file (``FILE``); the function gets
    ``out``, None when optional and absent. Refused at parse time, before any work, when it
    cannot be written."""
    parser.add_argument("--out", required=required, metavar=metavar, help=help,
                        type=writable_path(directory=metavar == "DIR"))


def writable_path(directory: bool = True) -> Callable[[str], str]:
    """An argparse ``type`` accepting a path a command can write: a directory (or a file) that
    exists and is writable, or one that can be created (its nearest existing ancestor is a
    writable directory). Remote paths (gs://) are the writer's to check."""
    def parse(text: str) -> str:
        why = unwritable(text, directory=directory)
        if why:
            raise argparse.ArgumentTypeError(f"{why}; give a {'directory' if directory else 'file'} "
                                             "path that can be written")
        return text
    parse.__name__ = "directory" if directory else "file"
    return parse


def bounded(kind: type, minimum: float, inclusive: bool = True) -> Callable[[str], float]:
    """An argparse ``type``: a number of ``kind`` (int or float) at least ``minimum`` (above
    it when not ``inclusive``); the error says the valid range."""
    valid = f"{'an integer' if kind is int else 'a number'} {'>=' if inclusive else '>'} {minimum:g}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {valid}") from None
        if not (value >= minimum if inclusive else value > minimum) or value != value:
            raise argparse.ArgumentTypeError(f"{text}: must be {valid}")
        return value
    parse.__name__ = kind.__name__
    return parse


COUNT = bounded(int, 0)  # a number of refits, replicates, ...: 0 or more
POSITIVE = bounded(int, 1)  # a number of starts, points, steps, ...: 1 or more
POSITIVE_FLOAT = bounded(float, 0.0, inclusive=False)
SEED_HELP = "random seed (an integer >= 0): the bootstrap's resamples and any other random draw"


class _Parser(argparse.ArgumentParser):
    """A usage error is one line on stderr (exit 2), naming the flag, and where the help is;
    the usage block is left to --help."""

    def error(self, message):
        self.exit(exit_codes.USAGE, f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; imports none of the modules that run them."""
    parser = _Parser(prog="depthdelusion", epilog=EPILOG,
                                     description="Depth x width scaling-law training and analysis.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_commands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    return parser


def add_commands(subparsers) -> dict[str, argparse.ArgumentParser]:
    """Add every command of :data:`COMMANDS` to `subparsers`; returns their parsers by name."""
    parsers = {}
    for name, target, help_text in COMMANDS:
        description = _DESCRIPTIONS.get(name, help_text[:1].upper() + help_text[1:] + ".")
        sub = subparsers.add_parser(name, help=help_text, description=description, epilog=EPILOG,
                                    formatter_class=functools.partial(_Formatter, target=target))
        _ARGUMENTS[name](sub)
        sub.set_defaults(target=target)
        parsers[name] = sub
    return parsers


class _Formatter(argparse.HelpFormatter):
    """Wraps the description, keeps the exit-code table's lines, and shows a library default
    (``LIBRARY_DEFAULT``) as the command function's: its module is imported for help only."""

    def __init__(self, prog, target: str = "", **kwargs):
        super().__init__(prog, **kwargs)
        self._target = target

    def _fill_text(self, text, width, indent):
        if text is EPILOG:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is not LIBRARY_DEFAULT or not self._target or isinstance(action, _DeprecatedMethod):
            return text
        try:
            module, function = self._target.split(":")
            run = getattr(importlib.import_module(module), function)
        except ImportError:  # e.g. help in an install without the training stack
            return text
        defaults = {name: p.default for name, p in inspect.signature(run).parameters.items()}
        for options in getattr(run, "option_groups", {}).values():  # FitOptions, RowOptions
            defaults.update({f.name: f.default for f in dataclasses.fields(options)})
        if action.dest not in defaults:
            return text
        return f"{text}; default {defaults[action.dest]}"


def _missing_package(err: ModuleNotFoundError) -> bool:
    return bool(err.name) and err.name.split(".")[0] != "depthdelusion"


def command(argv: list[str]) -> tuple[str, Callable[[], int]]:
    """Parse `argv`: (the command's name, its function bound to the parsed arguments). Imports
    the command's module; a usage error exits (status 2) like any argparse parser."""
    args = vars(build_parser().parse_args(list(argv)))
    name, target = args.pop("command"), args.pop("target")
    module, function = target.split(":")
    run = getattr(importlib.import_module(module), function)
    for parameter, options in getattr(run, "option_groups", {}).items():  # e.g. FitOptions
        args[parameter] = options.from_arguments(args)
    return name, functools.partial(run, **args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[0] if argv and not argv[0].startswith("-") else "COMMAND"
    try:
        name, run = command(argv)
        return int(run())
    except ModuleNotFoundError as err:
        if not _missing_package(err):
            raise
        print(f"depthdelusion {name}: error: needs the Python package {err.name!r}, which is not "
              "installed; install depthdelusion with its dependencies (pip install depthdelusion) "
              "for this command", file=sys.stderr)
        return exit_codes.USAGE
    except (ValueError, FileNotFoundError) as err:
        # Configuration and input errors: one clear line, no traceback.
        print(f"depthdelusion {name}: error: {err}", file=sys.stderr)
        return exit_codes.USAGE
    except KeyboardInterrupt:  # Ctrl-C: the user knows why it stopped; a traceback says nothing more
        print(f"\ndepthdelusion {name}: interrupted (Ctrl-C)", file=sys.stderr)
        return exit_codes.INTERRUPTED


class _DeprecatedMethod(argparse.Action):
    """`--method lm|huber`, the older spelling of `--loss ls|huber`: sets --loss and says so."""

    def __call__(self, parser, namespace, value, option_string=None):
        loss = {"lm": "ls", "huber": "huber"}[value]
        print(f"{parser.prog}: warning: --method {value} is deprecated; it is --loss {loss}",
              file=sys.stderr)
        setattr(namespace, "loss", loss)


def add_loss(p, choices: tuple[str, ...], help: str, deprecated_method: bool = True) -> None:
    """The fit's objective, one name in every command: --loss (fit, report, isoflop)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--loss", choices=choices, default=LIBRARY_DEFAULT, help=help)
    if deprecated_method:
        group.add_argument("--method", choices=("lm", "huber"), action=_DeprecatedMethod, dest="loss",
                           default=argparse.SUPPRESS, help="deprecated: the older spelling of --loss "
                           "(lm = ls, huber = huber)")


# ---- the arguments of each command, in COMMANDS order -------------------------------------------

def _config_argument(parser: argparse.ArgumentParser) -> None:
    from depthdelusion.config import PRESETS  # a table of names: no JAX

    parser.add_argument("config", nargs="?", metavar="CONFIG",
                        help=f"YAML file (local or gs://) or preset name ({', '.join(PRESETS)}); "
                        "default quickstart")


@_arguments("train", "Train one model. CONFIG is a YAML file with sections model, data, train, mesh "
            "(or a preset; default quickstart).")
def _train(p):
    _config_argument(p)
    add_set(p)
    add_out(p, "run directory; an existing one is resumed from its latest checkpoint")
    multi = p.add_argument_group("multi-process (not needed on TPU VMs, found automatically)")
    multi.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address")
    multi.add_argument("--num-processes", type=POSITIVE, metavar="N", help="how many processes train together")
    multi.add_argument("--process-id", type=COUNT, metavar="I", help="this process's index, 0 to N-1")


@_arguments("prepare-data", "Tokenize SOURCE (a SlimPajama root, .jsonl/.jsonl.zst/.txt files, a TFDS "
            "text dataset tfds:NAME[:CONFIG], or 'builtin') once and write packed windows of seq_len + 1 "
            "tokens as the TFDS dataset depthdelusion_windows/TOKENIZER_seqSEQ_LEN (ArrayRecord) under "
            "OUT. Train on the result with --set data.path=OUT. A directory prepared before "
            "prepare-data wrote TFDS is converted as it is (its own tokenizer and seq_len; no "
            "re-tokenizing).")
def _prepare_data(p):
    p.add_argument("source", metavar="SOURCE",
                   help="dataset path (local or gs://), tfds:NAME[:CONFIG], or 'builtin'")
    add_out(p, "the prepared dataset's directory (local or gs://)")
    p.add_argument("--tokenizer", default="gpt2", choices=["gpt2", "bytes"],
                   help="gpt2 (BPE, default) or bytes (one token per byte)")
    p.add_argument("--seq-len", type=POSITIVE, default=1024, help="tokens per training sequence (default 1024)")
    p.add_argument("--format", dest="data_format", default="auto",
                   choices=["auto", "slimpajama", "jsonl", "text"],
                   help="SOURCE's format (default auto: from its files)")
    p.add_argument("--max-train-tokens", type=POSITIVE, default=None,
                   help="stop after about this many training tokens (default: all)")
    p.add_argument("--seed", type=COUNT, default=42, help="built-in corpus documents (builtin only)")
    p.add_argument("--tfds-dir", default=None, metavar="DIR",
                   help="TFDS data directory for a tfds: SOURCE (default: $TFDS_DATA_DIR or ~/tensorflow_datasets)")
    p.add_argument("--tfds-text-feature", default="text", metavar="NAME",
                   help="the text feature of a tfds: SOURCE ('a/b' if nested)")


@_arguments("sweep", "Expand EXPERIMENT.yaml (format: experiments/README.md), train every run that "
            "has not finished under OUT/<run name>/ (finished runs are skipped, unfinished ones "
            "resumed), record failures without stopping, write OUT/runs.csv and OUT/report/. Exit "
            "code 1 if a run failed.")
def _sweep(p):
    p.add_argument("experiment", metavar="EXPERIMENT.yaml", help="the experiment grid (experiments/README.md)")
    add_out(p, "sweep directory (local or gs://)")
    p.add_argument("--only", metavar="PATTERN", help="run only names matching this glob (e.g. 'd16_*'; "
                   "comma-separated alternatives)")
    p.add_argument("--dry-run", action="store_true", help="list the runs and their state; run nothing")
    add_set(p, "override a field of every run, e.g. --set data.path=gs://b/sp (repeatable)")
    p.add_argument("--bootstrap", type=COUNT, default=LIBRARY_DEFAULT, help="bootstrap refits in the report")
    p.add_argument("--no-report", action="store_true", help="write runs.csv only, no fit")


@_arguments("sky-jobs", "Write one SkyPilot managed-job YAML per run of EXPERIMENT.yaml (each runs "
            "`sweep EXPERIMENT.yaml --only RUN` on its own TPU slice, into the same gs:// sweep "
            "directory, recovered on preemption), a SkyPilot config (labels app/sweep on every GCP "
            "resource, run on each slice; reservation; service account) and DIR/launch.sh. Checked by "
            "SkyPilot's own parser when it is installed (the skypilot extra); see tpu/README.md.")
def _sky_jobs(p):
    p.add_argument("grid", metavar="EXPERIMENT.yaml", help="the experiment grid (experiments/README.md)")
    add_out(p, "the sweep directory every job writes (gs://)")
    p.add_argument("--dir", dest="directory", required=True, type=writable_path(), help="where the job files and launch.sh go")
    add_set(p)
    p.add_argument("--only", metavar="PATTERN", help="only runs matching this glob")
    p.add_argument("--topology", help="the TPU slice per job (default: the grid's topology)")
    p.add_argument("--capacity", choices=("spot", "reserved", "best-effort"), default="spot",
                   help="spot (default), reserved (with --reservation) or best-effort (spot, else on-demand)")
    p.add_argument("--reservation", metavar="NAME", help="the TPU reservation for --capacity reserved")
    p.add_argument("--service-account", action="store_true", help="the slices run as SkyPilot's service "
                   "account (skypilot-v1@PROJECT; give it the bucket), not with your uploaded credentials")
    p.add_argument("--zone", help="e.g. us-east5-b (default: any zone SkyPilot finds capacity in)")
    p.add_argument("--max-restarts", type=COUNT, default=3, help="retries of a job that failed (not preempted)")
    p.add_argument("--secret", dest="secrets", action="append", default=[], metavar="NAME",
                   help="an environment variable for the runs whose value launch.sh reads from its own "
                   "environment (repeatable): never written to a file")
    p.add_argument("--wheelhouse", metavar="gs://...", help="the wheelhouse parent (default gs://BUCKET/wheelhouse)")
    p.add_argument("--no-check", dest="check", action="store_false", help="skip SkyPilot's validation")


@_arguments("plan", "Ahead-of-time compile the real train step for a TPU topology (needs the tpu "
            "extra: libtpu) and report per-chip HBM (arguments, outputs, temporaries) against the "
            "chip's capacity, XLA's FLOP count next to ours, and the mesh / remat that fits. CONFIG is "
            "a config YAML, a preset, or an experiment grid (every run is planned). Exit code 1 if "
            "any run does not fit.")
def _plan(p):
    p.add_argument("config", metavar="CONFIG", help="a config YAML, a preset name, or an experiment grid")
    p.add_argument("--topology", help="v4-32, v5e-16, v6e-64, v5p-128, ... (default: the grid's topology)")
    add_set(p)
    p.add_argument("--only", metavar="PATTERN", help="grids: plan only runs matching this glob")
    p.add_argument("--mesh", metavar="D,F,T", help="check this (data, fsdp, tensor) mesh "
                   "(default: fsdp over every chip)")
    p.add_argument("--remat", default="auto", help="auto (none -> save_dots -> full, first that fits) "
                   "or check one of none, save_dots, full")
    p.add_argument("--margin", type=POSITIVE_FLOAT, default=0.9, help="usable fraction of HBM (default 0.9)")
    p.add_argument("--table", metavar="FILE.md", type=writable_path(directory=False), help="also write the table and details here")


@_arguments("bench", "Benchmark the train step of CONFIG (YAML or preset; default quickstart) on "
            "random tokens: AOT compile time, then per-step wall time (median, p10, p90), tokens/s, "
            "model FLOP/s, MFU against the device's peak dense bf16 FLOP/s (none on CPU), peak memory.")
def _bench(p):
    _config_argument(p)
    add_set(p)
    p.add_argument("--steps", type=COUNT, default=20, help="timed steps (0: compile only)")
    p.add_argument("--warmup", type=COUNT, default=3, help="untimed steps first")
    p.add_argument("--layer-stats", default="never", metavar="never|every|N|compare",
                   help="which steps also compute per-layer norms; compare alternates plain and "
                   "layer-stats steps and reports the logging cost as their ratio")
    p.add_argument("--json", dest="json_output", action="store_true",
                   help="one JSON object instead of a summary")


@_arguments("coord-check", "Coordinate check: train each width x depth for a few steps at the same "
            "base lr and record the RMS of every block's output and of the logits (table + PNG).")
def _coord_check(p):
    p.add_argument("--widths", default=LIBRARY_DEFAULT, help="comma-separated")
    p.add_argument("--depths", default=LIBRARY_DEFAULT, help="comma-separated")
    p.add_argument("--steps", type=POSITIVE, default=LIBRARY_DEFAULT, help="updates per shape")
    p.add_argument("--parametrization", default=LIBRARY_DEFAULT,
                   help="comma-separated: sp, mup, depth_mup, completep (one panel each)")
    p.add_argument("--lr", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT, help="base learning rate (constant)")
    p.add_argument("--batch-size", type=POSITIVE, default=LIBRARY_DEFAULT, help="sequences per step")
    p.add_argument("--seq-len", type=POSITIVE, default=LIBRARY_DEFAULT, help="tokens per sequence")
    p.add_argument("--head-dim", type=POSITIVE, default=LIBRARY_DEFAULT, help="per-head dimension")
    p.add_argument("--base-width", type=POSITIVE, default=LIBRARY_DEFAULT, help="the shape where the "
                   "multipliers are 1")
    p.add_argument("--base-depth", type=POSITIVE, default=LIBRARY_DEFAULT, help="the shape where the "
                   "multipliers are 1")
    add_out(p)


@_arguments("lr-transfer", "Learning-rate transfer experiment (e.g. experiments/lr_transfer.yaml), "
            "run as two grids by the sweep runner under DIR/runs: finished runs are reused, "
            "unfinished ones resumed, failed ones trained again. Exit code 1 if a run failed.")
def _lr_transfer(p):
    p.add_argument("experiment", metavar="EXPERIMENT", help="YAML file: base, parametrizations, "
                   "widths, depths, lrs, depth_sweep")
    add_out(p)


@_arguments("depth-confound", "The depth-confound study (e.g. experiments/depth_confound.yaml): "
            "plans and trains its runs under DIR/runs with the sweep runner's rules (finished runs "
            "skipped, unfinished resumed), extends lr grids until their best is interior, then "
            "writes report.md, points.csv, lr_curves.csv and loss_vs_depth.png (a partial study "
            "is labelled partial).")
def _depth_confound(p):
    add_planned_study(p, "base, widths, depths, lrs, lr_bounds, seeds, arm_a_depth, completep, "
                      "iso_flop, metric")


def add_planned_study(p, keys: str) -> None:
    """The arguments of a study planned from its finished runs (studies/common/planned_runs.py)."""
    p.add_argument("experiment", metavar="EXPERIMENT", help=f"YAML file: {keys}")
    add_out(p)
    p.add_argument("--max-runs", type=COUNT, default=None, help="train at most N runs this time")
    p.add_argument("--report-only", action="store_true", help="train nothing; report what finished")


@_arguments("public-shapes", "The public-shapes study: every law fitted to the Gemstones suite (hot and "
            "cooldown; total, Kaplan's non-embedding and fitted-ε N) by name, cluster-bootstrap intervals over whole runs, "
            "the calibrated tests with a per-run random effect, the critical depth, the learning-rate "
            "interaction and the paper's audit, the compute-optimal shape, the prediction test, the check on "
            "Gadre et al., the same tests on Chinchilla's runs (chinchilla_shapes), the later budgets to 350B; writes report.md, CSVs and figures. Tables are "
            "downloaded and cached (DEPTHDELUSION_TABLES_URL, DEPTHDELUSION_CACHE).")
def _public_shapes(p):
    add_out(p)
    p.add_argument("--bootstrap", type=COUNT, default=LIBRARY_DEFAULT, help="cluster-bootstrap refits per law")
    p.add_argument("--replicates", type=COUNT, default=LIBRARY_DEFAULT,
                   help="parametric-bootstrap replicates per test (0: Davies' bound, no kink test)")
    p.add_argument("--seed", type=COUNT, default=LIBRARY_DEFAULT, help=SEED_HELP)
    p.add_argument("--tables", default="gemstones,gemstones_cooldown",
                   help="tables fitted, comma-separated (default gemstones,gemstones_cooldown)")
    p.add_argument("--conventions", default="total,nonembedding,fitted",
                   help="N conventions, comma-separated: total, nonembedding (Kaplan's: both vocabulary "
                   "matrices removed), fitted (N_nonemb + ε·N_emb, ε fitted), no_embeds (the authors': one "
                   "matrix removed) (default total,nonembedding,fitted)")
    p.add_argument("--laws", default=None, help="laws fitted, comma-separated (default: all of the study's; "
                   "must include chinchilla)")
    p.add_argument("--no-lr-interaction", dest="lr_interaction", action="store_false",
                   help="skip the learning-rate comparison (gemstones vs gemstones_lr_half)")
    p.add_argument("--parts", default="laws,optimal,prediction,gadre,figures,chinchilla_shapes,later",
                   help="parts run, comma-separated (default all: laws,optimal,prediction,gadre,figures,"
                   "chinchilla_shapes (the same statistics on Chinchilla's runs), later (gemstones_100b_plus: "
                   "fitted to 100B tokens, predicted to 350B)); "
                   "without laws (the core: fits, tests, 4.1, 4.3, 4.4) the others write report_partial.md")
@_arguments("depth-vs-size", "The depth-vs-size study (e.g. experiments/depth_vs_size.yaml): at "
            "fixed non-embedding parameters and tokens, shapes from deep-narrow to shallow-wide; SP "
            "tuned per shape on a tuning seed, CompleteP transferred from each level's base shape. "
            "Plans and trains its runs under DIR/runs (finished skipped, unfinished resumed), then "
            "writes report.md, points.csv, lr_curves.csv and loss_vs_depth.png (a partial study is "
            "labelled partial).")
def _depth_vs_size(p):
    add_planned_study(p, "base, levels, tokens_per_param, warmup_fraction, match_tolerance, lrs, "
                      "lr_bounds, tuning_seed, seeds, metric")


@_arguments("report", "Fit the laws and write report.md, report.tex, CSVs and plots.")
def _report(p):
    p.add_argument("runs", metavar="RUNS", nargs="?", help=RUNS_HELP + " (or give --table)")
    add_published_table(p)
    add_out(p)
    p.add_argument("--bootstrap", type=COUNT, default=LIBRARY_DEFAULT, help="bootstrap refits per law")
    p.add_argument("--seed", type=COUNT, default=LIBRARY_DEFAULT, help=SEED_HELP)
    add_loss(p, ("ls", "huber"), "ls: least squares on loss, the mean; huber: Huber on log-loss, "
             "robust to outlying runs")
    p.add_argument("--step", type=COUNT, default=1000, help="step for persistence lengths")
    p.add_argument("--columns", metavar="NAME=COLUMN,...", help=COLUMNS_HELP)
    p.add_argument("--no-figures", action="store_true", help="skip the PNGs (matplotlib not needed)")
    p.add_argument("--groups", choices=("auto", "offsets", "pooled"), default="auto",
                   help="offsets: one offset E_g per group (token budgets that differ); pooled: one "
                        "law for all (flagged when budgets differ); auto (default): offsets when "
                        "the groups' token budgets differ or are unknown for some")
    p.add_argument("--params", choices=PARAMS_CHOICES, default="total",
                   help="parameter-count convention N (default total: a registered table's counts as "
                        "published; other tables' rows inconsistent with their shape are refitted "
                        "with N recomputed from (D, W)); " + PARAMS_HELP)
    add_table_options(p)
    add_row_options(p)
    add_vocab(p)
    add_interval_options(p)


@_arguments("fit", "Fit a registered law to runs and print the fit summary. Without --law, the law "
            "is picked from the table's columns, preferring the law with the most structure the "
            "table supports (depth_delusion needs depth and width, chinchilla tokens that vary); the "
            "choice and the reason are printed on stderr: a choice of what to fit, not a verdict "
            "(compare laws with `report`).")
def _fit(p):
    p.add_argument("runs", metavar="RUNS", nargs="?", help=RUNS_HELP + " (or give --table)")
    add_published_table(p)
    p.add_argument("--pool", metavar="NAME[=PATH]", help="fit RUNS pooled with this published "
                   "table (`depthdelusion tables list`), one offset E per source, the other "
                   "parameters shared")
    p.add_argument("--law", help="registered law name (`depthdelusion laws`); default: picked "
                   "from the columns present")
    add_loss(p, ("ls", "huber", "asymmetric"),
             "ls: least squares on loss, the mean; huber: Huber on log-loss, robust to "
             "outlying runs; asymmetric: squares with overestimates weighted more, for small runs "
             "that were under-tuned: fits the lower envelope (an expectile), not the mean")
    p.add_argument("--overestimate-weight", type=POSITIVE_FLOAT, metavar="W",
                   help="--loss asymmetric: weight of a prediction above the loss relative to one "
                        "below (the fit is the 1/(1+W) expectile; default 4)")
    p.add_argument("--validate", choices=("rollout",),
                   help="rollout: fit on the k smallest compute levels and predict the next, for "
                        "each k; prints the error per step (with --json: in the JSON, key "
                        "rollout) and writes rollout.csv under --out")
    p.add_argument("--bootstrap", type=COUNT, default=LIBRARY_DEFAULT, help="bootstrap refits (0 to skip)")
    p.add_argument("--seed", type=COUNT, default=LIBRARY_DEFAULT, help=SEED_HELP)
    p.add_argument("--starts", type=POSITIVE, metavar="N",
                   help="multi-start: at most N starting points: the full grid if it has at most N "
                        "points, else the centre and a seeded scrambled Sobol design (default 64; "
                        "giving it selects --search multistart)")
    p.add_argument("--grid-points", type=POSITIVE, metavar="K",
                   help="multi-start: grid values per parameter over its init range (default 3; "
                        "giving it selects --search multistart)")
    p.add_argument("--search", choices=("varpro", "multistart"),
                   help="the global search: varpro (variable projection: the parameters the law is "
                        "linear in, e.g. E, A, B, solved by NNLS on a grid over the others, its best "
                        "minima polished on every row) or multistart (--starts starts, each solved); "
                        "default: varpro for laws with linear parameters and at most 2 others, "
                        "multistart otherwise (said in the summary)")
    p.add_argument("--columns", metavar="NAME=COLUMN,...", help=COLUMNS_HELP)
    p.add_argument("--json", dest="json_output", action="store_true", help="print the fit as JSON")
    p.add_argument("--params", choices=PARAMS_CHOICES + ("fitted",),
                   help="parameter-count convention N: total as the table gives it (default), "
                        "recomputed from (D, W) (needs the vocabulary: a vocab_size column or "
                        "--vocab); " + PARAMS_HELP + "; fitted: N = N_nonemb + ε·N_emb with ε in "
                        "[0, 1] profiled for the law by least squares (its 95%% profile interval "
                        "printed); said in the notes")
    add_vocab(p)
    add_out(p, help="also write DIR/rows.csv (per row: inputs, loss, fitted, residual, robust z, "
            "leverage, Cook's distance, group), DIR/residuals.png and, with --validate, "
            "rollout.csv (without --out, the rollout is printed only)", required=False)
    add_table_options(p)
    add_row_options(p)
    add_interval_options(p)


def add_interval_options(p):
    """What a fit holds fixed, which sign λ may take, and how its intervals are made: one meaning
    in `fit` and `report` (fitting.options.FitOptions)."""
    p.add_argument("--fix", action="append", metavar="NAME=VALUE",
                   help="hold a law parameter at a value (repeatable), e.g. --fix kappa=2.5; to test "
                        "the paper's critical-depth slope, its κ (`depthdelusion laws`); `report` fixes it in every law that has it")
    p.add_argument("--signed-penalty", action="store_true",
                   help="the kink laws' depth penalty λ free in sign (fitted as it is, not in log "
                        "space), so that deeper-is-better past D_crit shows as λ < 0 instead of a "
                        "fit at the bound λ = 0")
    p.add_argument("--cluster", metavar="COLUMN",
                   help="resample the rows of one COLUMN value together in every bootstrap (e.g. a "
                        "run's checkpoints); 'row' for the row bootstrap; default: the table's run "
                        "column where a run has several rows, else the shape (depth × width) where "
                        "shapes repeat, else rows (named in the output)")
    p.add_argument("--profile", choices=("none", "fast", "full"),
                   help="profile-likelihood intervals: full walks a grid (default up to 2000 rows, "
                        "none above), fast finds each end by root-finding from the Wald bracket, "
                        "none skips them (the Jacobian and bootstrap intervals remain, named)")


def add_row_options(p):
    """Which rows a command that fits a table uses; one meaning in every such command
    (docs/analysis.md, "Choosing rows")."""
    add_row_selection(p)
    p.add_argument("--drop-outliers", action="store_true", help="leave out the rows whose |robust "
                   "z| exceeds --outlier-threshold in a first fit (said in the output)")
    p.add_argument("--outlier-threshold", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT, metavar="Z",
                   help="|robust z| (residual of a Huber fit / (1.4826·MAD)) above which a row is "
                        "an outlier")


def add_row_selection(p):
    """--group VALUE, --by COL, --where EXPR: the same in every command that reads a table."""
    p.add_argument("--group", metavar="VALUE", help="keep only the rows whose group column is VALUE")
    p.add_argument("--by", metavar="COL", help="each value of column COL fitted separately, side by "
                   "side (JSON: {\"by\": COL, \"groups\": {VALUE: ...}})")
    p.add_argument("--where", metavar="EXPR", help="keep only the rows satisfying EXPR: COL OP VALUE "
                   "joined by 'and', OP one of == != < <= > >= (e.g. \"params >= 1e8 and dataset == "
                   "web\"); numbers compare as numbers, true/false case-insensitively, else as text")


@_arguments("isoflop", "Chinchilla's Approach 2 on an isoFLOP sweep. Runs are grouped into compute "
            "budgets (a compute/flops/C column, else C = 6·N·D; runs within --tolerance of a "
            "budget's smallest C form it); per budget an OLS parabola of loss in ln N gives N* "
            "with Fieller's 95% interval; budgets with fewer than 3 sizes, no minimum (or one too flat "
            "for a finite N*), or a vertex outside their sampled N range are flagged and left out (a table where "
            "fewer than half the budgets have 3 sizes is not a sweep: refused); N* ∝ C^a and D* ∝ C^b by OLS "
            "of ln N* on ln C (t interval). Then the bias of Approach 2 on this exact grid: the "
            "Chinchilla law fitted to the table is simulated at the same (N, D) with its residual "
            "noise, and Approach 2's exponents on the simulations are compared with the law's own.")
def _isoflop(p):
    p.add_argument("runs", metavar="RUNS", nargs="?", help=RUNS_HELP + " (or give --table)")
    add_published_table(p)
    add_row_selection(p)
    p.add_argument("--columns", metavar="NAME=COLUMN,...", help=COLUMNS_HELP)
    p.add_argument("--column", action="append", metavar="NAME=COLUMN",
                   help="read the table's COLUMN as NAME, e.g. --column loss=final_loss (repeatable)")
    p.add_argument("--tolerance", type=bounded(float, 0.0),
                   help="relative tolerance on C within which runs form one budget (default: the "
                        "library's, printed in the summary and the JSON)")
    p.add_argument("--include-flagged", action="store_true",
                   help="also fit the exponents on budgets whose vertex lies outside their sampled "
                        "N range (budgets without a minimum are never used)")
    p.add_argument("--no-bias", dest="bias", action="store_false",
                   help="skip the simulated bias of Approach 2 on this grid")
    add_loss(p, ("ls", "huber"), "objective of the Chinchilla fit the bias simulation starts from",
             deprecated_method=False)
    p.add_argument("--replicates", type=POSITIVE,
                   help="simulated replicates of the grid for the bias (default: the library's, "
                        "printed with the bias)")
    p.add_argument("--seed", type=COUNT, default=LIBRARY_DEFAULT, help=SEED_HELP)
    p.add_argument("--json", dest="json_output", action="store_true",
                   help="print {a, b, budgets[, bias]} as JSON")
    add_out(p, help="write the isoFLOP figure(s) here", required=False)


@_arguments("shape", "The compute-optimal depth and width at each --compute budget, and the band of "
            "shapes whose predicted loss is within --tolerance of the best, from every table given "
            "(each one suite) pooled: each suite keeps its own E, A, α, B, β; the shape term (a bowl "
            "in ln(D/W)) and ε in N = N_nonemb + ε·N_emb are shared (--law). Intervals: cluster "
            "bootstrap over whole runs. The first line says whether C lies inside the data.")
def _shape(p):
    p.add_argument("runs", metavar="RUNS", nargs="*", help="our own runs, each one suite: " + RUNS_HELP)
    p.add_argument("--table", dest="table_names", action="append", metavar="NAME[=PATH]",
                   help="a published table by name, one suite (repeatable; `depthdelusion tables list`)")
    p.add_argument("--compute", type=POSITIVE_FLOAT, action="append", required=True, metavar="FLOPS",
                   help="a training budget C in FLOPs, e.g. 1e21 (repeatable)")
    p.add_argument("--law", choices=("auto", "bowl", "kink", "chinchilla", "separate", "shared"),
                   default="auto",
                   help="auto (default): picked by held-out error (leave one suite out, leave runs "
                        "out, rollout; the table is printed); bowl: shared bowl and ε, per-suite "
                        "Chinchilla terms; kink: the paper's critical-depth penalty instead of the "
                        "bowl; chinchilla: no shape term; separate: each suite alone; shared: one "
                        "law for all suites")
    p.add_argument("--tolerance", type=bounded(float, 0.0, inclusive=False), default=0.01,
                   help="the band: shapes whose predicted loss is within this relative tolerance of "
                        "the best (default 0.01)")
    p.add_argument("--reference", metavar="SUITE", help="the suite whose loss scale and N(D, W) the "
                   "answer uses (default the first given)")
    p.add_argument("--resamples", type=COUNT, default=LIBRARY_DEFAULT,
                   help="cluster-bootstrap refits (whole runs drawn within each suite)")
    p.add_argument("--seed", type=COUNT, default=LIBRARY_DEFAULT, help=SEED_HELP)
    p.add_argument("--column", action="append", metavar="NAME=COLUMN",
                   help="read RUNS' COLUMN as NAME, e.g. --column width=d_model (repeatable)")
    p.add_argument("--json", dest="json_output", action="store_true",
                   help="print the answer as JSON (keys depth, width, params, tokens, loss, band)")
    add_out(p, help="write a figure per budget here (predicted loss over width × depth, the band, "
            "the suites' shapes, D_crit and published LLMs)", required=False)


def add_published_table(p):
    """The one ``--table NAME[=PATH]`` option: a published run table instead of RUNS."""
    p.add_argument("--table", dest="table_name", metavar="NAME[=PATH]",
                   help="a published table by name instead of RUNS (`depthdelusion tables list`; "
                   "downloaded from its source and cached on first use), or NAME=PATH for a local "
                   "copy of its source file (or folder), checked against the registered sha256")
    p.add_argument("--allow-modified", action="store_true",
                   help="--table (or --pool) NAME=PATH: read a copy whose sha256 is not the registered one "
                   "(said in the output; refused without this flag)")


def add_table_options(p):
    p.add_argument("--column", action="append", metavar="NAME=COLUMN",
                   help="read the table's COLUMN as NAME, e.g. --column loss=final_loss (repeatable)")
    p.add_argument("--reduce", metavar="best-of=COL|mean=COL", action="append",
                   help="one row per replicate cell (rows with equal params, tokens, depth, width): "
                        "the lowest loss over COL (e.g. best-of=lr; biases the loss down) or the "
                        "mean over it (e.g. mean=seed); repeatable, applied in order (best-of=lr "
                        "then mean=seed: the best lr of each seed, then the mean over seeds)")


@_arguments("runs", "`runs export SOURCE...`: the run table (docs/run_table.md, one row per run, "
            "every status) of run directories or sweeps, an MLflow experiment and W&B run files.")
def _runs(p):
    p.add_argument("action", choices=("export",), help="export: write the run table")
    p.add_argument("sources", metavar="SOURCE", nargs="*",
                   help="run directories or sweep directories (searched for summary.json)")
    p.add_argument("--csv", dest="csv_path", metavar="FILE", type=writable_path(directory=False),
                   help="the CSV to write (default: stdout)")
    p.add_argument("--mlflow-experiment", metavar="NAME", help="also the runs of this MLflow experiment")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, else "
                   "MLflow's default)")
    p.add_argument("--wandb-dir", metavar="DIR", help="also the W&B run files (run-*.wandb) under DIR")


@_arguments("tables", "Published run tables by name (Gemstones, Epoch's Chinchilla points, the isoFLOP "
            "sweeps Open-Athena compiled, ...): `list` them, `show NAME` their provenance (source "
            "URL, commit, sha256, license, citation, columns, published fit), `get NAME` the table in "
            "the run-table schema. A table is downloaded from its source on first use, verified by "
            "sha256 and cached (DEPTHDELUSION_CACHE); DEPTHDELUSION_TABLES_URL points downloads at a "
            "mirror laid out as OWNER/REPO/COMMIT/PATH.")
def _tables(p):
    p.add_argument("action", choices=("list", "show", "get"),
                   help="list: one line per table; show NAME: its provenance, columns and published "
                        "fit; get NAME: the table in the run-table schema")
    p.add_argument("name", metavar="NAME", nargs="?", help="a table's name (`depthdelusion tables list`)")
    p.add_argument("--json", dest="json_output", action="store_true", help="show: as JSON")
    add_out(p, "get: the CSV to write (default: stdout)", required=False, metavar="FILE")


@_arguments("laws", "List the registered laws: formula, parameters and the columns a table needs "
            "for each.")
def _laws(p):
    p.add_argument("--columns", action="store_true",
                   help="also list the column names and aliases a table may use")


@_arguments("persistence")
def _persistence(p):
    p.add_argument("runs", metavar="RUNS", help="a directory of run directories")
    p.add_argument("--step", type=COUNT, default=1000, help="training step (nearest logged is used)")
    p.add_argument("--kind", choices=("weight", "activation"), default="weight",
                   help="which per-layer gradient norms: weight (default) or activation")


@_arguments("audit")
def _audit(p):
    p.add_argument("runs", metavar="RUNS", help=RUNS_HELP)
    p.add_argument("--columns", metavar="NAME=COLUMN,...", help=COLUMNS_HELP)
    add_vocab(p)


def add_vocab(p):
    p.add_argument("--vocab", type=POSITIVE, metavar="V", help="vocabulary size for the parameter-count "
                   "audit when the table has no vocab_size column (never assumed)")


@_arguments("expand", "Depth expansion. With --after: write a new run directory whose checkpoint has "
            "a block inserted after each given block (0 = bottom), initialised like a fresh block with "
            "zero attention-output and MLP-down projections, so the function is unchanged; it resumes "
            "with the parent's data position. With --probe: the loss gradient w.r.t. those projections "
            "at every insertion point on train and held-out batches, the jumpboard step, and the "
            "activation-gradient covariance.")
def _expand(p):
    p.add_argument("run", metavar="RUN", help="a trained run directory (with checkpoints/)")
    p.add_argument("--after", metavar="K[,K...]", help="insert a block after each of these blocks")
    add_out(p, "the new run directory (--probe: where probe.json/md go; default RUN/expansion_probe, "
            "which the report's persistence figure reads)", required=False)
    p.add_argument("--seed", type=COUNT, default=0, help="draw of the inserted blocks (default 0)")
    add_set(p, "train.* fields of the new run, e.g. --set train.steps=600 (repeatable)")
    p.add_argument("--probe", action="store_true", help="measure instead of expanding")
    p.add_argument("--batches", type=POSITIVE, default=16, help="--probe: train and held-out batches each")
    p.add_argument("--etas", metavar="E[,E...]", help="--probe: jumpboard step sizes")
    p.add_argument("--step", type=COUNT, help="--after: the parent's checkpoint to expand (default the newest)")


@_arguments("expansion-prediction", "For every parent run under --runs (a finished sweep of "
            "experiments/depth_expansion_prediction.yaml): probe every insertion point, expand after "
            "each k and train each child --steps more steps; the Spearman correlation of the signal "
            "with the realised drop in validation loss per parent (seed), and its mean over seeds with "
            "a t interval over seeds (cut to [-1, 1]) and a within-seed permutation p-value.")
def _expansion_prediction(p):
    p.add_argument("--runs", required=True, help="the parents' sweep directory")
    add_out(p)
    p.add_argument("--steps", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="training steps of each child after expansion")
    p.add_argument("--probe-batches", type=POSITIVE, default=LIBRARY_DEFAULT, help="batches per probe")


@_arguments("expansion-growth", "For a finished sweep of experiments/depth_expansion_growth_matched.yaml: "
            "expands every depth-2 run from its --switch-step checkpoint to depth 4, trains it to its "
            "schedule's end, then compares each arm at its tuned learning rate (the depth-confound rule on "
            "the mean validation loss over seeds) with the compute-matched depth-4 scratch runs: the "
            "paired difference and its t interval, on --test-seeds when given. With --static-control: "
            "the grown and scratch arms (OUT/growth_matched.csv) against a static model of the parents' "
            "depth at the same FLOPs, each arm's lr chosen on the seeds other than --test-seeds, "
            "Welch's t interval on the test seeds (labelled PARTIAL while control runs are unfinished).")
def _expansion_growth(p):
    p.add_argument("--runs", help="the growth sweep directory (omit with --static-control to compare the "
                   "table already in OUT)")
    add_out(p)
    p.add_argument("--switch-step", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="the parents' checkpoint to grow from")
    p.add_argument("--test-seeds", default="", metavar="S[,S...]",
                   help="seeds kept out of the lr choice, on which the difference is measured at each "
                        "arm's chosen lr (default: none; the difference is then measured on the seeds "
                        "that chose the lrs)")
    p.add_argument("--static-control", metavar="DIR",
                   help="the static control sweep's directory (experiments/depth_expansion_static_control.yaml)")
    p.add_argument("--static-grid", default=LIBRARY_DEFAULT, metavar="YAML",
                   help="the control's grid, which says how many runs are planned")


@_arguments("expansion-study", "Trains the depth grid and the growth grid (skipping finished runs), "
            "expands each growth parent and trains it on, probes every depth-grid run, and writes "
            "tables and figures to --out (probes are cached under OUT/probes).")
def _expansion_study(p):
    p.add_argument("--depth-grid", default=LIBRARY_DEFAULT, help="the depth grid's YAML")
    p.add_argument("--growth-grid", default=LIBRARY_DEFAULT, help="the growth grid's YAML")
    p.add_argument("--runs", default=LIBRARY_DEFAULT, help="parent folder of the two sweeps' run directories")
    add_out(p)
    p.add_argument("--probe-batches", type=POSITIVE, default=LIBRARY_DEFAULT, help="batches per probe")
    p.add_argument("--train", choices=("all", "growth", "none"), default=LIBRARY_DEFAULT,
                   help="what to train before probing: both grids and the grown runs (all), "
                   "the growth grid and grown runs only (growth), nothing (none)")


@_arguments("persistence-probe", "Per-layer weight- and activation-gradient norms at initialisation "
            "and over the first K AdamW steps for a grid of widths x depths (built-in corpus), the "
            "persistence rate 1/ℓ of each with its sign, ℓ(W) power law vs log form, and one figure "
            "panel per width.")
def _persistence_probe(p):
    from depthdelusion.config import PARAMETRIZATIONS

    p.add_argument("--widths", default=LIBRARY_DEFAULT, help="comma-separated")
    p.add_argument("--depths", default=LIBRARY_DEFAULT, help="comma-separated")
    p.add_argument("--steps", type=POSITIVE, default=LIBRARY_DEFAULT, help="K, AdamW updates after init")
    p.add_argument("--batch-size", type=POSITIVE, default=LIBRARY_DEFAULT, help="sequences per step")
    p.add_argument("--seq-len", type=POSITIVE, default=LIBRARY_DEFAULT, help="tokens per sequence")
    p.add_argument("--head-dim", type=POSITIVE, default=LIBRARY_DEFAULT, help="per-head dimension")
    p.add_argument("--lr", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT, help="AdamW learning rate")
    p.add_argument("--parametrization", default=LIBRARY_DEFAULT, choices=PARAMETRIZATIONS,
                   help="one of sp, mup, depth_mup, completep")
    p.add_argument("--compute-dtype", default=LIBRARY_DEFAULT, choices=("auto", "float32", "bfloat16"),
                   help="auto: bfloat16 on accelerators, float32 on CPU")
    p.add_argument("--seed", type=COUNT, default=LIBRARY_DEFAULT, help="initialisation and data seed")
    p.add_argument("--max-params", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT,
                   help="skip shapes with more parameters (at the default: about 2 GB with Adam)")
    add_out(p)


@_arguments("persistence-study", "Windowed persistence rate per run, its evolution over training, "
            "ℓ(W) power law vs log form over all runs, loss vs depth and the loss-optimal depth per "
            "width, seed-level intervals per cell, the paper's implied ℓ(W) against the measured one. "
            "RUNS: one or more sweep output directories (experiments/persistence_study.yaml, "
            "persistence_width.yaml, or another sweep logging per-layer gradient norms); each is a "
            "study of its own.")
def _persistence_study(p):
    p.add_argument("runs", metavar="RUNS", nargs="+", help="sweep output directories")
    add_out(p)
    p.add_argument("--step", type=COUNT, default=LIBRARY_DEFAULT, help="requested step")
    p.add_argument("--window", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT,
                   help="relative half-width of the step window (0.2 at step 1000: steps 800-1200)")
    p.add_argument("--grid", action="append",
                   help="a grid file, to list the runs that have not finished (repeatable)")


@_arguments("spectrum", "Covariance spectra of the token embeddings and of the residual stream after "
            "every block, over held-out tokens, with a tail-index fit per layer.")
def _spectrum(p):
    p.add_argument("run", metavar="RUN", help="a run directory written by `depthdelusion train`")
    p.add_argument("--tokens", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="held-out tokens to use")
    p.add_argument("--rows", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="sequences per forward pass")
    add_out(p, "output directory (default RUN/spectrum)", required=False)


@_arguments("data-exponent", "Token sweeps (ROOT/SWEEP/RUN/, one run per budget): the data "
            "exponent b of L = E + B·T^-b with its profile-likelihood interval, against 2βs/(2βs+1) "
            "from the spectrum of the LM head's input and the readout's source smoothness s.")
def _data_exponent(p):
    p.add_argument("root", metavar="ROOT", help="a directory of token sweeps: ROOT/SWEEP/RUN/")
    add_out(p, "the study directory to write")
    p.add_argument("--tokens", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="held-out tokens per run for the spectra")
    p.add_argument("--largest-only", action="store_true",
                   help="spectra and readout of each sweep's largest budget only (default: every run)")
    p.add_argument("--sweep-commands", metavar="FILE",
                   help="a text file of the sweep commands that trained ROOT, quoted in README.md")
    p.add_argument("--refit-tables", action="store_true",
                   help="ROOT is a written study directory: refit its measured b from runs.csv "
                        "(no run directories needed) and rewrite the tables in --out")


@_arguments("data-exponent-ridge", "Ridge readouts on a trained run's frozen features (the LM "
            "head's input over held-out tokens; target: the head's centred readout of the most "
            "frequent next token plus Gaussian noise): the data exponent b of the exact excess "
            "risk over n, ridge tuned per n, with a bootstrap interval, against 2βs/(2βs+1) from "
            "the features' spectrum and from spectra with β halved and doubled (which must fail).")
def _data_exponent_ridge(p):
    p.add_argument("run", metavar="RUN", help="a run directory written by `depthdelusion train`")
    add_out(p, "the directory to write ridge.csv, curves.csv and ridge.md into")
    p.add_argument("--tokens", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="held-out tokens in the feature pool")
    p.add_argument("--rows", type=POSITIVE, default=LIBRARY_DEFAULT, help="sequences per forward pass")
    p.add_argument("--n-min", type=POSITIVE, default=LIBRARY_DEFAULT, help="smallest training sample")
    p.add_argument("--n-max", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="largest training sample (the grid doubles from --n-min)")
    p.add_argument("--reps", type=POSITIVE, default=LIBRARY_DEFAULT, help="independent replicates")
    p.add_argument("--seed", type=COUNT, default=LIBRARY_DEFAULT, help="seed of the subsamples and noise")
    p.add_argument("--noise", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT,
                   help="noise standard deviation over the target signal's")
    p.add_argument("--target-rank", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="the target readout: the head's column of the k-th most frequent next token")


@_arguments("redundancy-study", "The synthetic check of the redundancy law: fitted data-scaling "
            "exponents of ridge regression against 2βs/(2βs+1), their invariance under a change of "
            "features, and a mixture of two spectra (rates.csv, invariance.csv, mixture.csv, "
            "report.md, learning_curves.png).")
def _redundancy_study(p):
    add_out(p)
    p.add_argument("--seeds", type=POSITIVE, default=LIBRARY_DEFAULT, help="seeds per case")
    p.add_argument("--no-figures", action="store_true", help="skip the PNGs (matplotlib not needed)")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite report.md from the tables already in --out")


if __name__ == "__main__":
    sys.exit(main())

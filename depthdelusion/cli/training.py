"""The arguments of the training commands: train, prepare-data, sweep, sky-jobs, plan, bench."""
from __future__ import annotations

import argparse

from .arguments import COUNT, POSITIVE, POSITIVE_FLOAT, CommandArguments, add_options, add_out, add_set, writable_path

ARGUMENTS = CommandArguments()


def _config_argument(parser: argparse.ArgumentParser) -> None:
    from depthdelusion.config import PRESETS  # a table of names: no JAX

    parser.add_argument("config", nargs="?", metavar="CONFIG",
                        help=f"YAML file (local or gs://) or preset name ({', '.join(PRESETS)}); "
                        "default quickstart")


@ARGUMENTS.command("train", "Train one model. CONFIG is a YAML file with sections model, data, train, mesh "
            "(or a preset; default quickstart).")
def _train(p):
    _config_argument(p)
    add_set(p)
    add_out(p, "run directory; an existing one is resumed from its latest checkpoint")
    multi = p.add_argument_group("multi-process (not needed on TPU VMs, found automatically)")
    multi.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address")
    multi.add_argument("--num-processes", type=POSITIVE, metavar="N", help="how many processes train together")
    multi.add_argument("--process-id", type=COUNT, metavar="I", help="this process's index, 0 to N-1")


@ARGUMENTS.command("prepare-data", "Tokenize SOURCE (a SlimPajama root, .jsonl/.jsonl.zst/.txt files, a TFDS "
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


@ARGUMENTS.command("sweep", "Expand EXPERIMENT.yaml (format: experiments/README.md), train every run that "
            "has not finished under OUT/<run name>/ (finished runs are skipped, unfinished ones "
            "resumed), record failures without stopping, write OUT/runs.csv and OUT/report/. Exit "
            "code 1 if a run failed.")
def _sweep(p):
    from depthdelusion.analysis.fitting.options import FitOptions  # numpy, no scipy

    p.add_argument("experiment", metavar="EXPERIMENT.yaml", help="the experiment grid (experiments/README.md)")
    add_out(p, "sweep directory (local or gs://)")
    p.add_argument("--only", metavar="PATTERN", help="run only names matching this glob (e.g. 'd16_*'; "
                   "comma-separated alternatives)")
    p.add_argument("--dry-run", action="store_true", help="list the runs and their state; run nothing")
    add_set(p, "override a field of every run, e.g. --set data.path=gs://b/sp (repeatable)")
    add_options(p, FitOptions, None, command="sweep", only=("bootstrap",))
    p.add_argument("--no-report", action="store_true", help="write runs.csv only, no fit")


@ARGUMENTS.command("sky-jobs", "Write one SkyPilot managed-job YAML per run of EXPERIMENT.yaml (each runs "
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


@ARGUMENTS.command("plan", "Ahead-of-time compile the real train step for a TPU topology (needs the tpu "
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


@ARGUMENTS.command("bench", "Benchmark the train step of CONFIG (YAML or preset; default quickstart) on "
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



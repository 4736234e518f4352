"""The arguments of the training commands: train, prepare-data, sweep, sky-jobs, plan, bench; their
options are those :mod:`depthdelusion.training_options` declares (:func:`.arguments.add_options`)."""
from __future__ import annotations

import argparse

from depthdelusion.training_options import (BenchOptions, PlanOptions, PrepareOptions, ProcessOptions, SkyJobsOptions,
                                            SweepOptions)

from .arguments import CommandArguments, add_options, add_out, add_set, writable_path

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
    add_options(p, ProcessOptions, "multi-process (not needed on TPU VMs, found automatically)")


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
    add_options(p, PrepareOptions, None)


@ARGUMENTS.command("sweep", "Expand EXPERIMENT.yaml (format: experiments/README.md), train every run that "
            "has not finished under OUT/<run name>/ (finished runs are skipped, unfinished ones "
            "resumed), record failures without stopping, write OUT/runs.csv and OUT/report/. Exit "
            "code 1 if a run failed.")
def _sweep(p):
    from depthdelusion.analysis.fitting.options import FitOptions  # numpy, no scipy

    p.add_argument("experiment", metavar="EXPERIMENT.yaml", help="the experiment grid (experiments/README.md)")
    add_out(p, "sweep directory (local or gs://)")
    add_options(p, SweepOptions, None, only=("only", "dry_run"))
    add_set(p, "override a field of every run, e.g. --set data.path=gs://b/sp (repeatable)")
    add_options(p, FitOptions, None, command="sweep", only=("bootstrap",))
    add_options(p, SweepOptions, None, command="sweep", only=("no_report", "report_workers"))


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
    add_options(p, SkyJobsOptions, None)


@ARGUMENTS.command("plan", "Ahead-of-time compile the real train step for a TPU topology (needs the tpu "
            "extra: libtpu) and report per-chip HBM (arguments, outputs, temporaries) against the "
            "chip's capacity, XLA's FLOP count next to ours, and the mesh / remat that fits. CONFIG is "
            "a config YAML, a preset, or an experiment grid (every run is planned). Exit code 1 if "
            "any run does not fit.")
def _plan(p):
    p.add_argument("config", metavar="CONFIG", help="a config YAML, a preset name, or an experiment grid")
    add_options(p, PlanOptions, None, only=("topology",))
    add_set(p)
    add_options(p, PlanOptions, None, without=("topology",))
    p.add_argument("--table", metavar="FILE.md", type=writable_path(directory=False), help="also write the table and details here")


@ARGUMENTS.command("bench", "Benchmark the train step of CONFIG (YAML or preset; default quickstart) on "
            "random tokens: AOT compile time, then per-step wall time (median, p10, p90), tokens/s, "
            "model FLOP/s, MFU against the device's peak dense bf16 FLOP/s (none on CPU), peak memory.")
def _bench(p):
    _config_argument(p)
    add_set(p)
    add_options(p, BenchOptions, None)
    p.add_argument("--json", dest="json_output", action="store_true",
                   help="one JSON object instead of a summary")

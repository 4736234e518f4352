"""The options of the training commands (train, prepare-data, sweep, plan, sky-jobs, bench), each
declared once beside its field (:mod:`depthdelusion.option_fields`): the command line builds their
parsers from these declarations and hands each command its options object whole. Pure data, no
JAX: defining a command's arguments imports this module, never the module that runs it."""
from __future__ import annotations

from dataclasses import dataclass

from depthdelusion.option_fields import COUNT, POSITIVE, POSITIVE_FLOAT, FromArguments, option


@dataclass(frozen=True)
class ProcessOptions(FromArguments):
    """`train`'s place in a multi-process job; None: found automatically (TPU VMs) or from the
    DEPTHDELUSION_* environment (``parallel.distributed.initialize``)."""

    coordinator: str | None = option(None, "process 0's address", metavar="HOST:PORT")
    num_processes: int | None = option(None, "how many processes train together", type=POSITIVE, metavar="N")
    process_id: int | None = option(None, "this process's index, 0 to N-1", type=COUNT, metavar="I")


@dataclass(frozen=True)
class PrepareOptions(FromArguments):
    """How `prepare-data` tokenizes and packs its SOURCE (``data.prepare.prepare``'s keywords)."""

    tokenizer: str = option("gpt2", "gpt2 (BPE) or bytes (one token per byte)", choices=("gpt2", "bytes"))
    seq_len: int = option(1024, "tokens per training sequence", type=POSITIVE)
    #: the flag is --format; ``prepare`` calls it ``data_format``
    format: str = option("auto", "SOURCE's format (auto: from its files)",
                         choices=("auto", "slimpajama", "jsonl", "text"))
    max_train_tokens: int | None = option(None, "stop after about this many training tokens (default: all)",
                                          type=POSITIVE)
    seed: int = option(42, "built-in corpus documents (builtin only)", type=COUNT)
    tfds_dir: str | None = option(None, "TFDS data directory for a tfds: SOURCE (default: $TFDS_DATA_DIR "
                                  "or ~/tensorflow_datasets)", metavar="DIR")
    tfds_text_feature: str = option("text", "the text feature of a tfds: SOURCE ('a/b' if nested)", metavar="NAME")


@dataclass(frozen=True)
class SweepOptions(FromArguments):
    """Which runs of a grid `sweep` trains, and whether it reports (the report's fit options: a
    ``FitOptions`` beside this)."""

    only: str | None = option(None, "run only names matching this glob (e.g. 'd16_*'; comma-separated "
                              "alternatives)", metavar="PATTERN")
    dry_run: bool = option(False, "list the runs and their state; run nothing")
    no_report: bool = option(False, "write runs.csv only, no fit")
    #: 1 from Python (spawned workers need the caller's ``__main__`` guard); on the command line
    #: the report's own default (``ReportOptions.workers``; 100 is ``PARALLEL_FROM_BOOTSTRAPS``,
    #: not imported: this module stays pure data)
    report_workers: int | None = option(
        1, "processes for the closing report's independent fits; the report is the same for any number",
        type=POSITIVE, metavar="N", commands={"sweep": dict(default=None, help=(
            "processes for the closing report's independent fits (default: the CPUs this process may "
            "use when the report bootstraps 100 times or more, else 1); the report is the same for any "
            "number"))})


@dataclass(frozen=True)
class PlanOptions(FromArguments):
    """What `plan` compiles and checks (``plan.plan_config``'s mesh, remat and margin)."""

    topology: str | None = option(None, "v4-32, v5e-16, v6e-64, v5p-128, ... (default: the grid's topology)")
    only: str | None = option(None, "grids: plan only runs matching this glob", metavar="PATTERN")
    mesh: str | None = option(None, "check this (data, fsdp, tensor) mesh (default: fsdp over every chip)",
                              metavar="D,F,T")
    remat: str = option("auto", "auto (none -> save_dots -> full, first that fits) or check one of none, "
                        "save_dots, full")
    margin: float = option(0.9, "usable fraction of HBM", type=POSITIVE_FLOAT)


@dataclass(frozen=True)
class SkyJobsOptions(FromArguments):
    """How `sky-jobs` writes each run's SkyPilot job (``skypilot_jobs.render``'s keywords, the
    config's capacity and account, the launch script's wheelhouse and secrets)."""

    only: str | None = option(None, "only runs matching this glob", metavar="PATTERN")
    topology: str | None = option(None, "the TPU slice per job (default: the grid's topology)")
    capacity: str = option("spot", "spot, reserved (with --reservation) or best-effort (spot, else on-demand)",
                           choices=("spot", "reserved", "best-effort"))
    reservation: str | None = option(None, "the TPU reservation for --capacity reserved", metavar="NAME")
    service_account: bool = option(False, "the slices run as SkyPilot's service account "
                                   "(skypilot-v1@PROJECT; give it the bucket), not with your uploaded credentials")
    zone: str | None = option(None, "e.g. us-east5-b (default: any zone SkyPilot finds capacity in)")
    max_restarts: int = option(3, "retries of a job that failed (not preempted)", type=COUNT)
    #: environment variables' names, never their values (launch.sh reads those from its own)
    secret: tuple[str, ...] | list[str] | None = option(
        None, "an environment variable for the runs whose value launch.sh reads from its own "
        "environment (repeatable): never written to a file", repeatable=True, metavar="NAME")
    wheelhouse: str | None = option(None, "the wheelhouse parent (default gs://BUCKET/wheelhouse)",
                                    metavar="gs://...")
    no_check: bool = option(False, "skip SkyPilot's validation")


@dataclass(frozen=True)
class BenchOptions(FromArguments):
    """What `bench` times (``train.bench.bench``'s keywords)."""

    steps: int = option(20, "timed steps (0: compile only)", type=COUNT)
    warmup: int = option(3, "untimed steps first", type=COUNT)
    layer_stats: str = option("never", "which steps also compute per-layer norms; compare alternates plain "
                              "and layer-stats steps and reports the logging cost as their ratio",
                              metavar="never|every|N|compare")

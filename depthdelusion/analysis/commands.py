"""CLI subcommands of the analysis package: ``report``, ``fit``, ``persistence``, ``audit``.

Registered by ``depthdelusion.cli`` through :func:`register`; each handler takes the argparse
Namespace and returns an exit code. Bad input raises ValueError / FileNotFoundError, which the
CLI prints as one line.
"""
from __future__ import annotations


RUNS_HELP = ("a directory of run directories (searched for summary.json), a CSV "
             "(depth,width,params|params_millions,loss[,tokens,loss_se,group,name]), or 'paper' "
             "for the bundled data of the Depth Delusion paper")


def register(subparsers) -> None:
    """Add the analysis subcommands to the CLI's subparsers."""
    p = subparsers.add_parser("report", help="write the analysis report (md, tex, csv, png)",
                              description="Fit the laws and write report.md, report.tex, CSVs and plots.")
    add_report_arguments(p)

    p = subparsers.add_parser("fit", help="fit one law and print its summary",
                              description="Fit a registered law to runs and print the fit summary.")
    p.add_argument("runs", metavar="RUNS", help=RUNS_HELP)
    p.add_argument("--law", default="depth_delusion", help="registered law name (default depth_delusion)")
    p.add_argument("--method", choices=("lm", "huber"), default="lm")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap refits (0 to skip)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--group", help="only the runs of this group")
    p.add_argument("--json", action="store_true", help="print the fit as JSON")
    p.set_defaults(func=run_fit)

    p = subparsers.add_parser("persistence", help="gradient persistence length per run and ℓ(W)")
    p.add_argument("runs", metavar="RUNS", help="a directory of run directories")
    p.add_argument("--step", type=int, default=1000, help="training step (nearest logged is used)")
    p.add_argument("--kind", choices=("weight", "activation"), default="weight")
    p.set_defaults(func=run_persistence)

    p = subparsers.add_parser("audit", help="check parameter counts against depth and width")
    p.add_argument("runs", metavar="RUNS", help=RUNS_HELP)
    p.set_defaults(func=run_audit)


def add_report_arguments(p) -> None:
    p.add_argument("runs", metavar="RUNS", help=RUNS_HELP)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap refits per law (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--method", choices=("lm", "huber"), default="lm")
    p.add_argument("--step", type=int, default=1000, help="step for persistence lengths")
    p.add_argument("--no-figures", action="store_true", help="skip the PNGs")
    p.add_argument("--groups", choices=("auto", "offsets", "pooled"), default="auto",
                   help="offsets: one offset E_g per group (token budgets that differ); pooled: one "
                        "law for all (flagged when budgets differ); auto (default): offsets when "
                        "the groups' token budgets differ or are unknown for some")
    p.add_argument("--params", choices=("total", "non_embedding", "recomputed"), default="total",
                   help="parameter-count convention N (default total; rows inconsistent with their "
                        "shape are refitted with N recomputed from (D, W))")
    p.set_defaults(func=run_report)


def run_report(args) -> int:
    from .report import write_report

    report = write_report(args.runs, args.out, bootstrap=args.bootstrap, seed=args.seed,
                          method=args.method, step=args.step, figures=not args.no_figures,
                          runs_label=str(args.runs), groups=args.groups, params=args.params)
    print(f"wrote {len(report.files)} files to {report.out}")
    print(report.verdict)
    return 0


def run_fit(args) -> int:
    from .fitting import fit
    from .runs import load_runs

    result = fit(load_runs(args.runs, group=args.group), args.law, args.method,
                 bootstrap=args.bootstrap, seed=args.seed)
    print(result.to_json() if args.json else result.summary())
    return 0


def run_persistence(args) -> int:
    from .persistence import persistence_lengths, persistence_scaling

    fits = persistence_lengths(args.runs, step=args.step, kind=args.kind)
    if not fits:
        raise ValueError(f"{args.runs}: no run logged per-layer {args.kind} gradient norms")
    for f in fits:
        print(f.describe())
    try:
        print(persistence_scaling(fits).summary())
    except ValueError as err:
        print(f"ℓ(W) not fitted: {err}")
    return 0


def run_audit(args) -> int:
    from .consistency import audit_param_counts

    print(audit_param_counts(args.runs).summary())
    return 0



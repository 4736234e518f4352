"""CLI subcommands of the analysis package: ``report``, ``fit``, ``laws``, ``persistence``, ``audit``.

Registered by ``depthdelusion.cli`` through :func:`register` (imported only when one of these
commands runs, so they need numpy and scipy, never JAX); each handler takes the argparse
Namespace and returns an exit code. Bad input raises ValueError / FileNotFoundError, which the
CLI prints as one line. Imports of the analysis modules are inside the handlers, so ``--help``
stays fast and ``report --no-figures`` never imports matplotlib.
"""
from __future__ import annotations

import sys

RUNS_HELP = ("a directory of run directories (searched for summary.json), a CSV with the columns "
             "the law needs (params,loss; params,tokens,loss; depth,width,params[,tokens],loss; "
             "aliases: `depthdelusion laws --columns`), or 'paper' for the bundled data of the "
             "Depth Delusion paper")
COLUMNS_HELP = ("read these table columns as the canonical ones, e.g. loss=val_loss,params=N "
                "(`depthdelusion laws --columns` lists names and aliases)")
#: Laws `fit` picks when --law is not given: the first whose columns the table has.
FIT_PREFERENCE = ("depth_delusion", "chinchilla", "kaplan")


def register(subparsers) -> None:
    """Add the analysis subcommands to the CLI's subparsers."""
    p = subparsers.add_parser("report", description="Fit the laws and write report.md, "
                              "report.tex, CSVs and plots.")
    add_report_arguments(p)

    p = subparsers.add_parser(
        "fit", description="Fit a registered law to runs and print the fit summary. Without "
        "--law, the law is picked from the table's columns: " + ", ".join(FIT_PREFERENCE)
        + ", the first whose columns the table has (depth_delusion needs depth and width, "
        "chinchilla tokens that vary); the choice is printed on stderr.")
    p.add_argument("runs", metavar="RUNS", help=RUNS_HELP)
    p.add_argument("--law", help="registered law name (`depthdelusion laws`); default: picked "
                   "from the columns present")
    p.add_argument("--method", choices=("lm", "huber"), default="lm")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap refits (0 to skip)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--starts", type=int, default=64, metavar="N",
                   help="at most N starting points from the grid (seeded subsample; default 64)")
    p.add_argument("--grid-points", type=int, default=3, metavar="K",
                   help="grid values per parameter over its init range (default 3)")
    p.add_argument("--group", help="only the runs of this group")
    p.add_argument("--columns", metavar="NAME=COLUMN,...", help=COLUMNS_HELP)
    p.add_argument("--json", action="store_true", help="print the fit as JSON")
    p.set_defaults(func=run_fit)

    p = subparsers.add_parser("laws", description="List the registered laws: formula, "
                              "parameters and the columns a table needs for each.")
    p.add_argument("--columns", action="store_true",
                   help="also list the column names and aliases a table may use")
    p.set_defaults(func=run_laws)

    p = subparsers.add_parser("persistence")
    p.add_argument("runs", metavar="RUNS", help="a directory of run directories")
    p.add_argument("--step", type=int, default=1000, help="training step (nearest logged is used)")
    p.add_argument("--kind", choices=("weight", "activation"), default="weight")
    p.set_defaults(func=run_persistence)

    p = subparsers.add_parser("audit")
    p.add_argument("runs", metavar="RUNS", help=RUNS_HELP)
    p.add_argument("--columns", metavar="NAME=COLUMN,...", help=COLUMNS_HELP)
    p.set_defaults(func=run_audit)


def add_report_arguments(p) -> None:
    p.add_argument("runs", metavar="RUNS", help=RUNS_HELP)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap refits per law (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--method", choices=("lm", "huber"), default="lm")
    p.add_argument("--step", type=int, default=1000, help="step for persistence lengths")
    p.add_argument("--columns", metavar="NAME=COLUMN,...", help=COLUMNS_HELP)
    p.add_argument("--no-figures", action="store_true", help="skip the PNGs (matplotlib not needed)")
    p.add_argument("--groups", choices=("auto", "offsets", "pooled"), default="auto",
                   help="offsets: one offset E_g per group (token budgets that differ); pooled: one "
                        "law for all (flagged when budgets differ); auto (default): offsets when "
                        "the groups' token budgets differ or are unknown for some")
    p.add_argument("--params", choices=("total", "non_embedding", "recomputed"), default="total",
                   help="parameter-count convention N (default total; rows inconsistent with their "
                        "shape are refitted with N recomputed from (D, W))")
    p.set_defaults(func=run_report)


def parse_columns(text: str | None) -> dict | None:
    """``"loss=val_loss,params=N"`` -> ``{"loss": "val_loss", "params": "N"}``."""
    if not text:
        return None
    mapping = {}
    for item in text.split(","):
        key, sep, col = (s.strip() for s in item.partition("="))
        if not sep or not key or not col:
            raise ValueError(f"--columns {text!r}: {item!r} is not NAME=COLUMN (e.g. "
                             "--columns loss=val_loss,params=N)")
        if key in mapping:
            raise ValueError(f"--columns {text!r}: {key!r} is given twice")
        mapping[key] = col
    return mapping


def _load(args):
    from .runs import load_runs

    return load_runs(args.runs, group=getattr(args, "group", None),
                     columns=parse_columns(getattr(args, "columns", None)))


def run_report(args) -> int:
    from .report import write_report

    if not args.no_figures:  # before the fits, not after them
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValueError("the report's figures need matplotlib, which is not installed: "
                             "pip install matplotlib, or pass --no-figures") from None
    report = write_report(_load(args), args.out, bootstrap=args.bootstrap, seed=args.seed,
                          method=args.method, step=args.step, figures=not args.no_figures,
                          runs_label=str(args.runs), groups=args.groups, params=args.params)
    print(f"wrote {len(report.files)} files to {report.out}")
    print(report.verdict)
    return 0


def pick_law(runs) -> tuple[str, str]:
    """The law ``fit`` uses without --law, and a sentence saying why."""
    from .columns import law_missing_columns, laws_for

    fitting = laws_for(runs)
    present = ", ".join(c for c in runs.columns if c in ("depth", "width", "params", "tokens", "loss"))
    for name in FIT_PREFERENCE:
        if not law_missing_columns(name, runs):
            others = [n for n in fitting if n != name]
            return name, (f"law: {name} (picked from the columns {present}; other "
                          f"laws this table can fit: {', '.join(others) or 'none'}; choose with --law)")
    raise ValueError(f"{runs.source}: no default law fits a table with the columns "
                     f"{present} (kaplan needs params, loss); laws it can fit: "
                     f"{', '.join(fitting) or 'none'}. Give --law, or map columns with --columns")


def run_fit(args) -> int:
    from .fitting import fit

    runs = _load(args)
    law = args.law
    if law is None:
        law, why = pick_law(runs)
        print(why, file=sys.stderr)
    for flag, value in (("--starts", args.starts), ("--grid-points", args.grid_points)):
        if value < 1:
            raise ValueError(f"{flag}={value}: must be a positive integer")
    result = fit(runs, law, args.method, bootstrap=args.bootstrap, seed=args.seed,
                 grid_points=args.grid_points, max_starts=args.starts)
    print(result.to_json() if args.json else result.summary())
    return 0


def run_laws(args) -> int:
    from .columns import describe_fields, law_columns
    from .laws import list_laws

    for law in list_laws():
        always = law_columns(law, with_tokens=False)
        varying = law_columns(law, with_tokens=True)
        cols = ",".join(always)
        if varying != always:
            cols += f"  (+ {','.join(c for c in varying if c not in always)} when they vary: the "
            cols += "token term is fitted only then)"
        print(f"{law.name}\n  L = {law.formula}\n  parameters: {', '.join(law.param_names)}\n"
              f"  columns: {cols}\n  source: {law.source}\n")
    if args.columns:
        print("Table columns (canonical name, meaning, aliases):")
        print(describe_fields())
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

    print(audit_param_counts(_load(args)).summary())
    return 0

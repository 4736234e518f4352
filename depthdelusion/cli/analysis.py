"""The arguments of the analysis commands: report, fit, isoflop, shape, runs, tables, laws,
persistence, audit. The fit and row options are those ``FitOptions`` and ``RowOptions`` declare
(:func:`.arguments.add_options`); fit's, isoflop's and persistence's own, those of
``analysis/command_options.py``."""
from __future__ import annotations

from .arguments import POSITIVE_FLOAT, RUNS_HELP, CommandArguments, add_options, add_out, writable_path

ARGUMENTS = CommandArguments()


#: The fit options `report` takes (the rest of FitOptions: `fit` only).
REPORT_WITHOUT = ("overestimate_weight",)
#: isoflop fits Chinchilla for its bias simulation: only its objective and seed are options
ISOFLOP_FIT_WITHOUT = ("bootstrap", "search", "starts", "grid_points", "overestimate_weight",
                       "outlier_threshold", "fix", "signed_penalty", "cluster", "profile")
#: audit reads one table whole: no split, no outlier check, no replicates
AUDIT_ROWS_WITHOUT = ("group", "where", "by", "drop_outliers", "column", "reduce", "allow_modified")


def add_fit_options(p, command: str, without=()) -> None:
    """The options ``FitOptions`` declares (fitting/options.py): how to fit, as ``command`` reads them."""
    from depthdelusion.analysis.fitting import options  # numpy, no scipy: for this parser only

    add_options(p, options.FitOptions, "how to fit", command=command, without=without)


def add_row_options(p, without=()) -> None:
    """The options ``RowOptions`` declares (fitting/options.py): which rows, read how; one
    meaning in every command that reads a table (docs/analysis.md, "Choosing rows")."""
    from depthdelusion.analysis.fitting import options

    add_options(p, options.RowOptions, "which rows, read how", without=without)


@ARGUMENTS.command("report", "Fit the laws and write report.md, report.tex, CSVs and plots.")
def _report(p):
    from depthdelusion.analysis.report.options import FigureOptions, ReportOptions  # numpy, no scipy

    p.add_argument("runs", metavar="RUNS", nargs="?", help=RUNS_HELP + " (or give --table)")
    add_published_table(p)
    add_out(p)
    add_options(p, FigureOptions, None)
    add_options(p, ReportOptions, "what the report reads and fits", command="report")
    add_fit_options(p, "report", without=REPORT_WITHOUT)
    add_row_options(p)


@ARGUMENTS.command("fit", "Fit a registered law to runs and print the fit summary. Without --law, the law "
                   "is picked from the table's columns, preferring the law with the most structure the "
                   "table supports (depth_delusion needs depth and width, chinchilla tokens that vary); the "
                   "choice and the reason are printed on stderr: a choice of what to fit, not a verdict "
                   "(compare laws with `report`).")
def _fit(p):
    from depthdelusion.analysis.command_options import FitCommandOptions  # numpy, no scipy: for this parser only

    p.add_argument("runs", metavar="RUNS", nargs="?", help=RUNS_HELP + " (or give --table)")
    add_published_table(p)
    p.add_argument("--pool", metavar="NAME[=PATH]", help="fit RUNS pooled with this published "
                   "table (`depthdelusion tables list`), one offset E per source, the other "
                   "parameters shared")
    add_options(p, FitCommandOptions, None, command="fit", without=("params",))
    p.add_argument("--json", dest="json_output", action="store_true", help="print the fit as JSON")
    add_options(p, FitCommandOptions, None, command="fit", only=("params",))  # report's N conventions, and "fitted"
    add_out(p, help="also write DIR/rows.csv (per row: inputs, loss, fitted, residual, robust z, "
            "leverage, Cook's distance, group), DIR/residuals.png and, with --validate, "
            "rollout.csv (without --out, the rollout is printed only)", required=False)
    add_fit_options(p, "fit")
    add_row_options(p)


@ARGUMENTS.command("isoflop", "Chinchilla's Approach 2 on an isoFLOP sweep. Runs are grouped into compute "
            "budgets (a compute/flops/C column, else C = 6·N·D; runs within --tolerance of a "
            "budget's smallest C form it); per budget an OLS parabola of loss in ln N gives N* "
            "with Fieller's 95% interval; budgets with fewer than 3 sizes, no minimum (or one too flat "
            "for a finite N*), or a vertex outside their sampled N range are flagged and left out (a table where "
            "fewer than half the budgets have 3 sizes is not a sweep: refused); N* ∝ C^a and D* ∝ C^b by OLS "
            "of ln N* on ln C (t interval). Then the bias of Approach 2 on this exact grid: the "
            "Chinchilla law fitted to the table is simulated at the same (N, D) with its residual "
            "noise, and Approach 2's exponents on the simulations are compared with the law's own.")
def _isoflop(p):
    from depthdelusion.analysis.command_options import IsoflopOptions

    p.add_argument("runs", metavar="RUNS", nargs="?", help=RUNS_HELP + " (or give --table)")
    add_published_table(p)
    add_options(p, IsoflopOptions, None)
    p.add_argument("--json", dest="json_output", action="store_true",
                   help="print {a, b, budgets[, bias]} as JSON")
    add_out(p, help="write the isoFLOP figure(s) here", required=False)
    add_fit_options(p, "isoflop", without=ISOFLOP_FIT_WITHOUT)
    add_row_options(p, without=("drop_outliers", "reduce", "vocab"))


@ARGUMENTS.command("shape", "The compute-optimal depth and width at each --compute budget, and the band of "
            "shapes whose predicted loss is within --tolerance of the best, from every table given "
            "(each one suite) pooled: each suite keeps its own E, A, α, B, β; whether the shape term "
            "(a bowl in ln(D/W), the paper's kink, Liu et al.'s width and depth terms) and ε in N = "
            "N_nonemb + ε·N_emb are shared is the law's (--law; auto picks by held-out error). Intervals: cluster "
            "bootstrap over whole runs. The first line says whether C lies inside the data.")
def _shape(p):
    from depthdelusion.analysis.fitting import options

    p.add_argument("runs", metavar="RUNS", nargs="*", help="our own runs, each one suite: " + RUNS_HELP)
    p.add_argument("--table", dest="table_names", action="append", metavar="NAME[=PATH]",
                   help="a published table by name, one suite (repeatable; `depthdelusion tables list`)")
    p.add_argument("--compute", type=POSITIVE_FLOAT, action="append", required=True, metavar="FLOPS",
                   help="a training budget C in FLOPs, e.g. 1e21 (repeatable)")
    add_options(p, options.ShapeOptions, "how to answer", command="shape")
    add_options(p, options.RowOptions, None, command="shape", only=("column",))
    p.add_argument("--json", dest="json_output", action="store_true",
                   help="print the answer as JSON (keys depth, width, params, tokens, loss, band)")
    add_out(p, help="write a figure per budget here (predicted loss over width × depth, the band, "
            "the suites' shapes, D_crit and published LLMs)", required=False)


def add_published_table(p):
    """The one ``--table NAME[=PATH]`` option: a published run table instead of RUNS (a copy whose
    sha256 differs needs RowOptions' ``--allow-modified``)."""
    p.add_argument("--table", dest="table_name", metavar="NAME[=PATH]",
                   help="a published table by name instead of RUNS (`depthdelusion tables list`; "
                   "downloaded from its source and cached on first use), or NAME=PATH for a local "
                   "copy of its source file (or folder), checked against the registered sha256")


@ARGUMENTS.command("runs", "`runs export SOURCE...`: the run table (docs/run_table.md, one row per run, "
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


@ARGUMENTS.command("tables", "Published run tables by name (Gemstones, Epoch's Chinchilla points, the isoFLOP "
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


@ARGUMENTS.command("laws", "List the registered laws: formula, parameters and the columns a table needs "
            "for each.")
def _laws(p):
    p.add_argument("--columns", action="store_true",
                   help="also list the column names and aliases a table may use")


@ARGUMENTS.command("persistence")
def _persistence(p):
    from depthdelusion.analysis.command_options import PersistenceLengthOptions  # numpy, no scipy

    p.add_argument("runs", metavar="RUNS", help="a directory of run directories")
    add_options(p, PersistenceLengthOptions, None, command="persistence")


@ARGUMENTS.command("audit")
def _audit(p):
    p.add_argument("runs", metavar="RUNS", help=RUNS_HELP)
    add_row_options(p, without=AUDIT_ROWS_WITHOUT)

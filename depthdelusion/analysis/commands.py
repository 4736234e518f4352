"""The analysis commands ``report``, ``fit``, ``isoflop``, ``laws``, ``persistence``, ``audit``: plain
functions of the parsed arguments (the parser is ``depthdelusion.cli``), each returning an exit
code. They need numpy and scipy, never JAX. Bad input raises ValueError / FileNotFoundError,
which the CLI prints as one line. Imports of the analysis modules are inside the functions, so
``report --no-figures`` never imports matplotlib.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from depthdelusion import exit_codes, rundir
from depthdelusion.outputs import refuse_own_inputs
from depthdelusion.progress import Stages

from .command_options import FitCommandOptions, IsoflopOptions, PersistenceLengthOptions
from .fitting.options import FitOptions, RowOptions, column_mapping
from .report.options import FigureOptions, ReportOptions
from .table.columns import present_columns

#: The files `fit --out DIR` writes (in DIR, or a folder of it per --by value).
FIT_FILES = ("rows.csv", "residuals.png", "rollout.csv")
#: The report's tables, each written as NAME.csv (tests/analysis/test_cli_analysis.py checks this
#: list against every ``Table("NAME", ...)`` the package makes).
REPORT_TABLES = ("calibrated_cells", "consistency", "design_parameters", "design_verdicts", "extrapolation",
                 "law_comparison", "llm_audit", "paper_comparison", "parameters", "persistence")
#: The files `report --out DIR` writes (in DIR, or a folder of it per --by value).
REPORT_FILES = ("report.md", "report.tex", "numerics.md", "*.png", *(f"{t}.csv" for t in REPORT_TABLES))
#: Laws `fit` picks when --law is not given: the first whose columns the table has.
FIT_PREFERENCE = ("depth_delusion", "chinchilla", "kaplan")


def _load(runs: str, rows: RowOptions = RowOptions()):
    """The table of RUNS with the rows and columns ``rows`` asks for (``by`` and
    ``drop_outliers`` apart: :func:`split_rows`)."""
    from .fitting.replicates import reduce_replicates
    from .table.load import load_runs

    table = load_runs(runs, group=rows.group, columns=column_mapping(rows.columns, rows.column),
                      where=rows.where)
    vocab, reduce = rows.vocab, rows.reduce
    if vocab is not None:
        if vocab < 1:
            raise ValueError(f"--vocab {vocab}: must be a positive vocabulary size")
        own = table.vocab_size[np.isfinite(table.vocab_size)]
        if len(own) and np.any(own != vocab):
            raise ValueError(f"--vocab {vocab}: the table's vocab_size column says "
                             f"{', '.join(str(int(v)) for v in np.unique(own))}")
        table.vocab_size = np.full(len(table), float(vocab))
    for note in table.notes:  # a duplicated row, an unread column that looks misspelled: say so now
        if "repeat an earlier row" in note or "did you mean" in note:
            print(f"warning: {note}", file=sys.stderr)
    for spec in [reduce] if isinstance(reduce, str) else (reduce or []):  # in the order given
        table = reduce_replicates(table, spec)
    return table


def split_rows(table, rows: RowOptions, law=None, options: FitOptions = FitOptions()) -> dict:
    """{value: runs} for ``--by COL`` (every value of COL side by side; {None: table} without
    it), each without its outlying rows under ``law`` when ``rows.drop_outliers`` (which says so
    in the runs' notes and selection). The one meaning of --by and --drop-outliers for every
    command that reads a table."""
    from .fitting.outlier_rows import without_outliers
    from .table.row_filter import split_by

    parts = split_by(table, rows.by) if rows.by else {None: table}
    if rows.drop_outliers:
        parts = {v: without_outliers(part, law, options) for v, part in parts.items()}
    return parts


def _need_matplotlib(what: str, instead: str) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError(f"{what} need matplotlib, which is not installed: pip install "
                         f"matplotlib, or {instead}") from None


def run_report(*, runs: str | None = None, out: str, table_name: str | None = None,
               options: FitOptions = FitOptions(), rows: RowOptions = RowOptions(),
               report: ReportOptions = ReportOptions(), drawing: FigureOptions = FigureOptions()) -> int:
    if not drawing.no_figures:  # before the fits, not after them
        _need_matplotlib("the report's figures", "pass --no-figures")
    refuse_own_inputs("--out", out, REPORT_FILES, [runs, *_table_files(table_name)])
    runs, label = runs_or_table(runs, table_name, "report", rows.allow_modified)
    table = _load(runs, rows)
    law = None
    if rows.drop_outliers:
        law, why = pick_law(table)
        print(f"--drop-outliers: outliers judged by the {why}", file=sys.stderr)
    parts = split_rows(table, rows, law, options)
    settings = dict(by=rows.by, report=dataclasses.replace(report, fit=options, runs_label=str(label)),
                    figures=not drawing.no_figures,
                    source=_report_source(runs if table_name is None else None, table_name, rows, options))
    if not rundir.is_local(out):  # the report's writers (csv, matplotlib) write local files
        import tempfile

        with tempfile.TemporaryDirectory(prefix="depthdelusion-report-") as tmp:
            _write_reports(parts, Path(tmp), **settings)
            rundir.copy_tree(Path(tmp), out)
        print(f"copied to {out}")
        return exit_codes.OK
    _write_reports(parts, Path(out), **settings)
    return exit_codes.OK


def _report_source(runs: str | None, table_name: str | None, rows: RowOptions, options: FitOptions) -> dict:
    """The report's input as command-line words (RUNS or --table NAME, and the row options, so
    that its "Regenerate with" line runs and reads the same rows) and, for a table by name, the
    table's source, licence and citation."""
    import shlex

    from .table.published import parse_table_arg, table_entry

    words = [shlex.quote(runs)] if table_name is None else ["--table", shlex.quote(table_name)]
    for flag, value in (("--group", rows.group), ("--where", rows.where), ("--by", rows.by),
                        ("--columns", rows.columns), ("--vocab", rows.vocab)):
        words += [flag, shlex.quote(str(value))] if value is not None else []
    for flag, values in (("--column", rows.column), ("--reduce", rows.reduce)):
        for value in [values] if isinstance(values, str) else (values or []):
            words += [flag, shlex.quote(value)]
    if rows.drop_outliers:
        words += ["--drop-outliers", "--outlier-threshold", repr(options.outlier_threshold)]
    words += ["--allow-modified"] if rows.allow_modified else []
    cite = table_entry(parse_table_arg(table_name)[0]).reference() if table_name else ""
    return dict(input_words=" ".join(words), citation=cite)


def _write_reports(parts, out, *, by, report: ReportOptions, figures, source: dict) -> None:
    from .report.build import write_report

    for value, part in parts.items():
        where_to = out if value is None else out / _safe_dir(f"{by}={value}")
        for note in part.notes:
            if note.startswith(("--where", "--drop-outliers")):
                print(note, file=sys.stderr)
        with Stages("report" if value is None else f"report {by}={value}") as progress:
            written = write_report(part, where_to, dataclasses.replace(report, **source),
                                   figures=figures, progress=progress)
        print(f"wrote {len(written.files)} files to {written.out}")
        print(written.verdict)


def _safe_dir(name: str) -> str:
    """A directory name for a --by value: characters other than letters, digits, ``=._-``
    replaced by ``_``."""
    import re

    return re.sub(r"[^A-Za-z0-9=._-]", "_", name) or "_"


def pick_law(runs) -> tuple[str, str]:
    """The law ``fit`` uses without --law, and a sentence saying why."""
    from .table.law_columns import law_missing_columns, laws_for

    fitting = laws_for(runs)
    present = ", ".join(c for c in present_columns(runs) if c in ("depth", "width", "params", "tokens", "loss"))
    passed = []  # the preferred laws this table cannot fit, with the columns each lacks
    for name in FIT_PREFERENCE:
        missing = law_missing_columns(name, runs)
        if missing:
            passed.append(f"{name} needs {', '.join(missing)}")
            continue
        others = [n for n in fitting if n != name]
        readings = "".join(f"; {v}" for v in runs.read_as.values())
        return name, (f"law: {name} (picked from the columns {present}: the first of "
                      f"{', '.join(FIT_PREFERENCE)} the table has the columns for"
                      + "".join(f"; {p}" for p in passed) + "; a choice of what to fit, not a "
                      "verdict that it fits best: compare laws with `depthdelusion report`; other "
                      f"laws this table can fit: {', '.join(others) or 'none'}; choose with "
                      f"--law){readings}")
    raise ValueError(f"{runs.source}: no default law fits a table with the columns "
                     f"{present} (kaplan needs params, loss); laws it can fit: "
                     f"{', '.join(fitting) or 'none'}. Give --law, or map columns with --columns")


def run_fit(*, runs: str | None = None, table_name: str | None = None, pool: str | None = None,
            fit: FitCommandOptions = FitCommandOptions(), options: FitOptions = FitOptions(),
            rows: RowOptions = RowOptions(), json_output: bool = False, out: str | None = None) -> int:
    from .fitting.clusters import cluster_kwargs
    from .fitting.engine import fit_with
    from .fitting.pooled import fit_pooled
    from .fitting.setup import check_fixed
    from .table.published import parse_table_arg
    from .table.published import pool as pool_runs

    law, validate, params = fit.law, fit.validate, fit.params
    _check_fit_options(runs, pool, rows, validate)
    refuse_own_inputs("--out", out, FIT_FILES, [runs, *_table_files(table_name, pool)])
    runs, _ = runs_or_table(runs, table_name, "fit", rows.allow_modified)
    table = _load(runs, RowOptions(group=rows.group, where=rows.where, columns=rows.columns,
                                   column=rows.column, reduce=rows.reduce))
    if params is not None and params != "fitted":  # the convention as asked, said in the fit's notes
        from .report.consistency import with_param_convention

        table, conv_notes = with_param_convention(table, params, vocab=rows.vocab)
        table.notes = list(table.notes) + conv_notes
    ours, pooled = table, (parse_table_arg(pool) if pool else None)
    if pooled:
        table = pool_runs(ours, *pooled, allow_modified=rows.allow_modified)
    if law is None:
        law, why = pick_law(table)
        print(why, file=sys.stderr)
    check_fixed(options, [law])
    if params == "fitted":  # ε of N = N_nonemb + ε·N_emb, profiled for this law
        table = _with_fitted_weight(table, law, options, pooled)
    progress = Stages("fit")  # stderr: a bar on a terminal, a line per stage in a log
    with_diagnostics = dataclasses.replace(options, diagnostics=True)
    if pooled:
        parts = {None: table}
        results = {None: fit_pooled(ours, pooled[0], law, path=pooled[1], allow_modified=rows.allow_modified,
                                    options=with_diagnostics, progress=progress,
                                    **cluster_kwargs(options.cluster, table))}
    else:
        parts = split_rows(table, rows, law, options)
        results = {v: fit_with(part, law, with_diagnostics, progress=progress,
                               **cluster_kwargs(options.cluster, part))
                   for v, part in parts.items()}
    rivals = {} if pooled else _size_rivals(results, parts, options, progress)
    checked = None
    if validate == "rollout":
        from .fitting.rollout import rollout

        checked = rollout(table, law, options)
    progress.close()
    with rundir.local_dir(out) as local_out:  # a gs:// OUT: written here, then copied up
        _print_fits(results, parts, rows.by, json_output, local_out, checked, rivals)
    if out is not None and not rundir.is_local(out):
        print(f"copied to {out}", file=sys.stderr)
    return exit_codes.OK


def _size_rivals(results, parts, options: FitOptions, progress) -> dict:
    """{value: the size-break rival of each depth-kink fit} (:mod:`.report.size_rival`)."""
    from .fitting.engine import fit_with
    from .report.size_rival import size_rival
    from .report.verdict import baseline_for, is_architecture_law

    out = {}
    for value, result in results.items():
        if is_architecture_law(result) and result.law.has_critical_depth:
            progress.stage("size-break rival")
            part = parts[value]
            out[value] = size_rival(result, baseline_for(result), lambda law, opts: fit_with(part, law, opts),
                                    options)
    return out


def _with_fitted_weight(table, law: str, options: FitOptions, pooled):
    from .fitting.embedding_weight import with_fitted_weight

    if pooled:
        raise ValueError("--params fitted fits ε on one table: it does not apply with --pool")
    table, notes, _ = with_fitted_weight(table, law, options.method)
    table.notes = list(table.notes) + notes
    return table


def _table_files(*table_args: str | None) -> list[str]:
    """The local files named by --table / --pool NAME=PATH: inputs that no output may replace."""
    from .table.published import parse_table_arg

    return [path for arg in table_args if arg for path in [parse_table_arg(arg)[1]] if path]


def _check_fit_options(runs, pool, rows: RowOptions, validate) -> None:
    """The `fit` options checked together (one-line errors)."""
    if pool and runs is None:
        raise ValueError("fit --pool NAME pools RUNS (our runs) with a published table: give RUNS")
    if pool and (rows.by or rows.drop_outliers):
        raise ValueError("fit --pool fits one pooled table: --by and --drop-outliers do not apply")
    if validate not in (None, "rollout"):
        raise ValueError(f"--validate {validate!r}: valid: rollout")


def _print_fits(results, parts, by, json_output, out, checked=None, rivals=None) -> None:
    """Each fit's summary (or JSON), and its rows under ``out``; the rollout ``checked`` (when
    asked for) printed after them, or inside the JSON, and written to ``out``/rollout.csv;
    ``rivals``: the size-break rival of each depth-kink fit, beside its reach."""
    from pathlib import Path

    from .formats import json_text
    from .report.residual_files import write_rows

    if out:
        for value, result in results.items():
            folder = Path(out) if value is None else Path(out) / _safe_dir(f"{by}={value}")
            written = write_rows(folder, parts[value], result)
            print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
        if checked is not None:
            print(f"wrote {checked.write_csv(Path(out) / 'rollout.csv')}", file=sys.stderr)
    rivals = rivals or {}
    if json_output:
        doc = ({"by": by, "groups": {v: _json_doc(r, parts[v], rivals.get(v)) for v, r in results.items()}}
               if by else _json_doc(results[None], parts[None], rivals.get(None)))
        if checked is not None:
            doc["rollout"] = checked.to_dict()
        # as FitResult.to_json writes it (an open interval end is null), without its whole text
        json_text.dump(doc, sys.stdout.write, null_nonfinite=True)
        print()
        return
    if by:
        print("\n\n".join(f"== {by} = {v} ({r.n} rows) ==\n{_summary(r, parts[v], rivals.get(v))}"
                           for v, r in results.items()))
    else:
        print(_summary(results[None], parts[None], rivals.get(None)))
    if checked is not None:
        print(checked.summary())


def _summary(result, runs, rival=None) -> str:
    """A fit's summary, with where a kink law's penalty acts (the rows it rests on) and, given
    its ``rival`` (:mod:`.report.size_rival`), whether a break in model size fits as well."""
    from .fitting.kink_reach import reach_of_fit

    reach = reach_of_fit(result, runs)
    return (result.summary() + (f"\n{reach.sentence()}" if reach is not None else "")
            + (f"\n{rival.sentence()}" if rival is not None else ""))


def _json_doc(result, runs, rival=None) -> dict:
    """A fit's JSON, with a kink law's reach under ``kink_reach`` and its size-break rival
    under ``size_rival``."""
    from .fitting.kink_reach import reach_of_fit

    doc, reach = result.json_doc(), reach_of_fit(result, runs)
    doc = doc if reach is None else {**doc, "kink_reach": reach.to_dict()}
    return doc if rival is None else {**doc, "size_rival": rival.to_dict()}


def run_isoflop(*, runs: str | None = None, table_name: str | None = None,
                rows: RowOptions = RowOptions(), options: FitOptions = FitOptions(),
                iso: IsoflopOptions = IsoflopOptions(), json_output: bool = False, out: str | None = None) -> int:
    """``depthdelusion isoflop``: Approach 2 per table (or per value of ``rows.by``), its bias on
    the grid (from a Chinchilla fit with ``options.loss``, seeded by ``options.seed``), the
    JSON, and the figure under ``out``."""
    import json

    from .fitting.isoflop import isoflop
    from .table.row_filter import split_by

    if options.method == "asymmetric":
        raise ValueError("--loss asymmetric: the bias simulation draws symmetric noise around the "
                         "fitted law's mean; use ls or huber")
    from .fitting.isoflop import BIAS_REPLICATES, TOLERANCE

    tolerance = TOLERANCE if iso.tolerance is None else iso.tolerance
    replicates = BIAS_REPLICATES if iso.replicates is None else iso.replicates
    if replicates < 1:
        raise ValueError(f"--replicates {replicates}: must be at least 1")
    refuse_own_inputs("--out", out, ("isoflop*.png",), [runs, *_table_files(table_name)])
    if out is not None:  # the figure is all --out holds: known before the fits, not after
        _need_matplotlib("isoflop --out (the isoFLOP figure)", "leave out --out")
    runs, _ = runs_or_table(runs, table_name, "isoflop", rows.allow_modified)
    table = _load(runs, rows)
    by = rows.by
    parts = {None: table} if by is None else split_by(table, by)
    results, not_fitted = {}, {}
    for value, part in parts.items():
        try:
            results[value] = isoflop(part, tolerance=tolerance, include_flagged=iso.include_flagged,
                                     bias=not iso.no_bias, method=options.method, replicates=replicates,
                                     seed=options.seed)
        except ValueError as err:
            if by is None:
                raise
            not_fitted[value] = str(err)  # one unusable group does not hide the others
            print(f"isoflop: {by} = {value} not fitted: {err}", file=sys.stderr)
    if not results:
        raise ValueError(f"no value of {by} has a usable isoFLOP sweep: "
                         + "; ".join(f"{by} = {v}: {why}" for v, why in not_fitted.items()))
    if out is not None:
        from .fitting.isoflop import file_label
        from .report.plots import isoflop_profiles

        with rundir.local_dir(out) as local_out:  # a gs:// OUT: drawn here, then copied up
            local_out.mkdir(parents=True, exist_ok=True)
            for value, res in results.items():
                name = "isoflop.png" if value is None else f"isoflop_{file_label(value)}.png"
                path = isoflop_profiles(res, local_out / name,
                                        title="" if value is None else f"{by} = {value}")
                print(f"wrote {path}", file=sys.stderr)
        if not rundir.is_local(out):
            print(f"copied to {out}", file=sys.stderr)
    if json_output:
        doc = (results[None].to_dict() if by is None
               else {"by": by, "groups": {str(k): r.to_dict() for k, r in results.items()},
                     "not_fitted": {str(k): why for k, why in not_fitted.items()}})
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        print("\n\n".join([(r.summary() if k is None else f"== {by} = {k} ==\n{r.summary()}")
                            for k, r in results.items()]
                           + [f"== {by} = {k} ==\nnot fitted: {why}" for k, why in not_fitted.items()]))
    return exit_codes.OK


def runs_or_table(runs, table_name: str | None, command: str, allow_modified: bool = False):
    """RUNS or ``--table NAME[=PATH]`` (exactly one): what to load, and the label a report gives
    it. A local copy that is not the registered source is refused unless ``allow_modified``."""
    if (runs is None) == (table_name is None):
        raise ValueError(f"{command}: give RUNS or --table NAME, not both and not neither")
    if table_name is None:
        return runs, str(runs)
    from .table.published import load_table, parse_table_arg

    return (load_table(*parse_table_arg(table_name), allow_modified=allow_modified),
            f"published table {table_name}")


def run_laws(*, columns: bool = False) -> int:
    from .laws import list_laws
    from .table.columns import describe_fields
    from .table.law_columns import law_columns

    for law in list_laws():
        always = law_columns(law, with_tokens=False)
        varying = law_columns(law, with_tokens=True)
        cols = ",".join(always)
        if varying != always:
            cols += f"  (+ {','.join(c for c in varying if c not in always)} when they vary: the "
            cols += "token term is fitted only then)"
        print(f"{law.name}\n  L = {law.formula}\n  parameters: {', '.join(law.param_names)}\n"
              f"  columns: {cols}\n  source: {law.source}\n")
    if columns:
        print("Table columns (canonical name, meaning, aliases):")
        print(describe_fields())
    return exit_codes.OK


def run_persistence(*, runs: str, options: PersistenceLengthOptions = PersistenceLengthOptions()) -> int:
    from .science.persistence import persistence_lengths, persistence_scaling

    fits = persistence_lengths(runs, step=options.step, kind=options.kind)
    if not fits:
        raise ValueError(f"{runs}: no run logged per-layer {options.kind} gradient norms")
    for f in fits:
        print(f.describe())
    try:
        print(persistence_scaling(fits).summary())
    except ValueError as err:
        print(f"ℓ(W) not fitted: {err}")
    return exit_codes.OK


def run_audit(*, runs: str, rows: RowOptions = RowOptions()) -> int:
    from .report.consistency import audit_param_counts, table_vocab

    table = _load(runs, rows)
    v = table_vocab(table)
    if v is None:
        raise ValueError(f"{table.source}: the audit needs the vocabulary size (embedding "
                         "parameters): the table has no vocab_size column; give --vocab V")
    print(audit_param_counts(table, vocab=v).summary())
    return exit_codes.OK


# The option objects each command gets whole: depthdelusion.cli builds them from the parsed
# arguments (their fields' names are the options' dests).
run_fit.option_groups = {"fit": FitCommandOptions, "options": FitOptions, "rows": RowOptions}
run_report.option_groups = {"options": FitOptions, "rows": RowOptions, "report": ReportOptions,
                            "drawing": FigureOptions}
run_isoflop.option_groups = {"options": FitOptions, "rows": RowOptions, "iso": IsoflopOptions}
run_persistence.option_groups = {"options": PersistenceLengthOptions}
run_audit.option_groups = {"rows": RowOptions}

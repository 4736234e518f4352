"""The report's sections on representation spectra and on the data exponent predicted from the
LM head: Markdown rendered from the numbers that analysis/science/spectra.py and readout.py read
from the runs' spectrum/ folders."""
from __future__ import annotations

from ..formats.table_text import markdown_table
from ..science.readout import readout_tables
from ..science.redundancy import predicted_exponent
from ..science.spectra import MIN_RANKS, S_VALUES, spectrum_tables


def spectrum_section(root) -> list[str]:
    """Markdown lines of the section on representation spectra: every RUN/spectrum/tail.csv
    below ``root``; no lines when there is none."""
    tables = spectrum_tables(root)
    if not tables:
        return []
    head = ["run", "layer", "β", "95% CI (jackknife)", "β halves", "ranks"] + [
        f"b(s={s:g})" for s in S_VALUES]
    lines = ["## Representation spectra and the data exponent they predict", "",
             "Tail index β of λ_i ∝ i^(−β) of the residual-stream covariance (layer 0: token "
             "embeddings, plus learned positions if any; layer l: after block l) from `depthdelusion spectrum`; interval: delete-"
             "one-group jackknife over token groups. The kernel-ridge rate predicts a data exponent "
             "b = 2βs/(2βs+1) for a target of source smoothness s; s is not estimated here, so b is "
             "shown for s in {" + ", ".join(f"{s:g}" for s in S_VALUES) + "} (the interval of b "
             "follows from β's).", ""]
    rows = [tail_row_cells(run, row, len(head)) for run, table in tables for row in table]
    return lines + markdown_table(head, rows).splitlines() + [""]


def tail_row_cells(run: str, row: dict, width: int) -> list[str]:
    beta = row["beta"]
    if beta is None:
        cells = [run, f"{row['layer']:.0f}", f"no fit (fewer than {MIN_RANKS} stable ranks)"]
        return cells + [""] * (width - len(cells))
    cells = [run, f"{row['layer']:.0f}", f"{beta:.3f}", f"[{row['beta_lo']:.3f}, {row['beta_hi']:.3f}]",
             f"{row['beta_half_a']:.3f} / {row['beta_half_b']:.3f}",
             f"{row['rank_lo']:.0f}–{row['rank_hi']:.0f}"]
    for s in S_VALUES:
        lo, hi = (predicted_exponent(max(b, 0.0), s) for b in (row["beta_lo"], row["beta_hi"]))
        cells.append(f"{predicted_exponent(max(beta, 0.0), s):.3f} [{lo:.3f}, {hi:.3f}]")
    return cells


def readout_section(root) -> list[str]:
    """Markdown lines of the table of the predicted exponent with s measured, for the runs below
    ``root`` whose spectrum/ holds a readout.csv; no lines when there is none."""
    found = readout_tables(root)
    if not found:
        return []

    def cell(r, key):
        v, lo, hi = r[key], r[key + "_lo"], r[key + "_hi"]
        if v is None:
            return "—"
        return f"{v:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else f"{v:.3f}"

    lines = ["Predicted data exponent with the source smoothness s measured from the LM head "
             "(`depthdelusion data-exponent`; analysis/science/readout.py): features = the head's input "
             "(final norm output), β its tail index, s from the decay a = 1 + 2βs of the readout "
             "power λ_i·Σ_v p_v (u_iᵀw̃_v)² over the same ranks, b = 2βs/(2βs+1) = (a − 1)/a; "
             "intervals: jackknife over token groups (not over training runs).", ""]
    rows = []
    for run, r in found:
        ranks = (f"{r['rank_lo']:.0f}–{r['rank_hi']:.0f}" if r["rank_lo"] is not None
                 else f"no fit (fewer than {MIN_RANKS} stable ranks)")
        rows.append([run, cell(r, 'beta'), cell(r, 's'), cell(r, 'b_pred'), ranks])
    table = markdown_table(["run", "β (head input)", "s", "b predicted", "ranks"], rows)
    return lines + table.splitlines() + [""]

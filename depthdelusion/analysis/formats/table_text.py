"""A small table type that renders the same rows as Markdown, LaTeX (booktabs) and CSV, and the
package's one Markdown-table and one CSV writer (every report, study and sweep file uses them).

The LaTeX is plain pdflatex input (packages: booktabs, geometry, graphicx, longtable — all in
Debian's texlive-latex-base + texlive-latex-recommended): every character LaTeX treats
specially is escaped, every non-ASCII character the reports use is mapped to a LaTeX command,
``x^y`` becomes a superscript, and tables are scaled down to the text width when wider.
"""
from __future__ import annotations

import csv
import io
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

_TEX_ESCAPE = {
    "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
    "~": r"\textasciitilde{}", "\\": r"\textbackslash{}", "<": r"$<$", ">": r"$>$", "|": r"$|$",
    "×": r"$\times$", "±": r"$\pm$", "≈": r"$\approx$", "≤": r"$\leq$", "≥": r"$\geq$",
    "≠": r"$\neq$", "→": r"$\to$", "∈": r"$\in$", "√": r"$\surd$", "∞": r"$\infty$",
    "∝": r"$\propto$", "·": r"$\cdot$", "−": "-", "–": "--", "—": "---", "…": r"\ldots{}",
    "‘": "`", "’": "'", "“": "``", "”": "''", "°": r"$^\circ$", "µ": r"$\mu$",
    "α": r"$\alpha$", "β": r"$\beta$", "γ": r"$\gamma$", "δ": r"$\delta$", "ε": r"$\epsilon$",
    "η": r"$\eta$", "θ": r"$\theta$", "κ": r"$\kappa$", "λ": r"$\lambda$", "μ": r"$\mu$",
    "ρ": r"$\rho$", "σ": r"$\sigma$", "τ": r"$\tau$", "χ": r"$\chi$", "Δ": r"$\Delta$",
    "ℓ": r"$\ell$", "²": r"$^2$", "³": r"$^3$", "⁻": r"$^-$", "¹": r"$^1$", "ᵀ": r"$^T$",
    "✓": "yes", "✗": "no",
}
# x^y: the exponent is a sign and a word (N^−α, W^p, C^0.338, T^-δ).
_SUPERSCRIPT = re.compile(r"\^([−\-+]?[0-9A-Za-z.α-ωΑ-Ωℓ]+)")


def _char(ch: str) -> str:
    if ch in _TEX_ESCAPE:
        return _TEX_ESCAPE[ch]
    if ord(ch) < 128:
        return "\\^{}" if ch == "^" else ch
    # Anything else: its ASCII decomposition (é -> e), else a visible placeholder.
    ascii_form = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
    return "".join(_TEX_ESCAPE.get(c, c) for c in ascii_form) or "?"


def tex_escape(text: str) -> str:
    """``text`` as LaTeX: specials escaped, Unicode mapped, ``x^y`` as a superscript."""
    out, pos = [], 0
    text = str(text)
    for m in _SUPERSCRIPT.finditer(text):
        out.append("".join(_char(c) for c in text[pos:m.start()]))
        out.append(r"\textsuperscript{" + "".join(_char(c) for c in m.group(1)) + "}")
        pos = m.end()
    out.append("".join(_char(c) for c in text[pos:]))
    return "".join(out)


def markdown_table(columns, rows, align: str = "") -> str:
    """A Markdown table, no trailing newline: header, separator, one line per row (cells as str).
    ``align``: one letter per column, ``l`` (``---``) or ``r`` (``---:``); empty: all left."""
    align = align or "l" * len(columns)
    if len(align) != len(columns) or set(align) - {"l", "r"}:
        raise ValueError(f"align={align!r}: one of l, r per column ({len(columns)} columns)")
    lines = ["| " + " | ".join(str(c) for c in columns) + " |",
             "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def csv_text(columns, rows) -> str:
    """CSV text: the header, then one line per row, ``\\n`` line ends (the same bytes on every
    OS). A row is a sequence of cells in column order or a dict keyed by column name (a missing
    key is an empty cell; a key that is not a column is an error). Cells are written as the csv
    module writes them (None empty, a float as repr): the caller fixes the digits."""
    columns = list(columns)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        if isinstance(row, dict):
            extra = set(row) - set(columns)
            if extra:
                raise ValueError(f"CSV row has cells for no column: {sorted(extra)} (columns: {columns})")
            row = [row.get(c) for c in columns]
        elif len(row) != len(columns):
            raise ValueError(f"CSV row has {len(row)} cells, expected {len(columns)} ({columns})")
        writer.writerow(row)
    return buf.getvalue()


def write_csv(path, columns, rows):
    """Write :func:`csv_text` to ``path`` (a local path, or an etils.epath path such as gs://…);
    returns the path."""
    path = path if hasattr(path, "write_text") else Path(path)
    path.write_text(csv_text(columns, rows))
    return path


#: Tables with more rows than this are set as a longtable (may break across pages).
LONGTABLE_ROWS = 40


@dataclass
class Table:
    """Rows of already-formatted strings under named columns (formatting fixed by the caller,
    so every rendering and every regeneration prints the same digits)."""

    name: str
    caption: str
    columns: list
    rows: list = field(default_factory=list)

    def add(self, *cells) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"table {self.name}: row has {len(cells)} cells, expected {len(self.columns)}")
        self.rows.append([str(c) for c in cells])

    def markdown(self) -> str:
        return markdown_table(self.columns, self.rows)

    def latex(self) -> str:
        """A booktabs table that fits the text width: scaled down (graphicx) when wider, or a
        small-print longtable when it has more than ``LONGTABLE_ROWS`` rows."""
        spec = "l" + "r" * (len(self.columns) - 1)
        head = " & ".join(tex_escape(c) for c in self.columns) + r" \\"
        body = [" & ".join(tex_escape(c) for c in r) + r" \\" for r in self.rows]
        caption = f"\\caption{{{tex_escape(self.caption)}}}\\label{{tab:{self.name}}}"
        if len(self.rows) > LONGTABLE_ROWS:
            return "\n".join([r"\begingroup\scriptsize\setlength{\tabcolsep}{3pt}",
                              f"\\begin{{longtable}}{{{spec}}}", caption + r"\\", r"\toprule", head,
                              r"\midrule\endhead", *body, r"\bottomrule", r"\end{longtable}",
                              r"\endgroup"])
        return "\n".join([r"\begin{table}[ht]", r"\centering\small", caption,
                          r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
                          f"\\begin{{tabular}}{{{spec}}}", r"\toprule", head, r"\midrule", *body,
                          r"\bottomrule", r"\end{tabular}}", r"\end{table}"])

    def csv(self) -> str:
        return csv_text(self.columns, self.rows)


LATEX_PACKAGES = ("booktabs", "graphicx", "longtable")


def latex_document(title: str, paragraphs: list, tables: list, header_comment: str = "") -> str:
    """A complete pdflatex document: title, paragraphs (plain text, escaped) and tables."""
    parts = ([f"% {line}" for line in header_comment.splitlines()] +
             [r"\documentclass{article}", *[f"\\usepackage{{{p}}}" for p in LATEX_PACKAGES],
              r"\usepackage[margin=2cm]{geometry}", r"\begin{document}", r"\sloppy",
              f"\\section*{{{tex_escape(title)}}}"])
    for p in paragraphs:
        parts += [tex_escape(p), ""]
    for t in tables:
        parts += [t.latex(), ""]
    parts.append(r"\end{document}")
    return "\n".join(parts) + "\n"

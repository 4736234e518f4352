"""A small table type that renders the same rows as Markdown, LaTeX (booktabs) and CSV."""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

_TEX_ESCAPE = {"&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "×": r"$\times$", "±": r"$\pm$",
               "≈": r"$\approx$", "−": "-", "–": "--", "κ": r"$\kappa$", "α": r"$\alpha$",
               "λ": r"$\lambda$", "γ": r"$\gamma$", "ℓ": r"$\ell$", "²": r"$^2$", "δ": r"$\delta$",
               "β": r"$\beta$", "∝": r"$\propto$", "·": r"$\cdot$", "Δ": r"$\Delta$", "∞": r"$\infty$"}


def tex_escape(text: str) -> str:
    return "".join(_TEX_ESCAPE.get(ch, ch) for ch in str(text))


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
        lines = ["| " + " | ".join(self.columns) + " |",
                 "|" + "|".join("---" for _ in self.columns) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(lines)

    def latex(self) -> str:
        spec = "l" + "r" * (len(self.columns) - 1)
        lines = [r"\begin{table}[ht]", r"\centering\small", f"\\caption{{{tex_escape(self.caption)}}}",
                 f"\\label{{tab:{self.name}}}", f"\\begin{{tabular}}{{{spec}}}", r"\toprule",
                 " & ".join(tex_escape(c) for c in self.columns) + r" \\", r"\midrule"]
        lines += [" & ".join(tex_escape(c) for c in r) + r" \\" for r in self.rows]
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        return "\n".join(lines)

    def csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(self.rows)
        return buf.getvalue()

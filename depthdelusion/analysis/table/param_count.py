"""The parameter count N as a stated choice: how a table counts its vocabulary matrices, and N
under a named convention.

Where N enters a law, its convention can decide the answer: on Gemstones the sign of the shape
effect flips between total and non-embedding N (issue 62). The conventions:

- ``total``: N as the table gives it (a published table's counts as its authors published them);
- ``nonembedding``: Kaplan et al.'s non-embedding N: every vocabulary matrix the total counts is
  removed (for an untied model both the input embedding and the LM head, for a tied one the one
  shared matrix).

The pieces of N = N_nonemb + ε·N_emb (a law that fits the weight ε of the embeddings) are
:func:`param_pieces`. What a table's total counts comes from its registration (``embeddings``
of :class:`.published.PublishedTable`, carried by the :class:`.runs.Runs` it loads as
``Runs.embeddings``), else from the table's own non-embedding column (the trainer writes
Kaplan's count there: ``depthdelusion.model_size.non_embedding_params``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

#: name -> what N means under it (``--params`` of fit and report).
PARAM_CONVENTIONS = {
    "total": "N as the table gives it (a published table's counts as published)",
    "nonembedding": "Kaplan's non-embedding N: every vocabulary matrix the total counts removed "
                    "(for an untied model both the input embedding and the LM head)",
}


@dataclass(frozen=True)
class EmbeddingCount:
    """How a table's total N counts the vocabulary: ``matrices`` V × W matrices of vocabulary
    ``vocab`` (2 for untied input embedding and LM head, 1 for tied ones or a head left out);
    ``tied`` is None when the source does not say; ``how`` states the rule and its evidence."""

    vocab: int
    matrices: int
    tied: bool | None
    how: str

    def embedding_params(self, width) -> np.ndarray:
        """N_emb: the vocabulary matrices the total counts, ``matrices``·V·W per row."""
        return self.matrices * float(self.vocab) * np.asarray(width, float)

    def summary(self) -> str:
        tied = {True: "tied", False: "untied", None: "tied or not: the source does not say"}[self.tied]
        plural = "x" if self.matrices == 1 else "ces"
        return f"N counts {self.matrices} vocabulary matri{plural} (V = {self.vocab:,}; embeddings {tied})"

    def describe(self) -> str:
        return f"{self.summary()}; non-embedding N = N − {self.matrices}·V·W. {self.how}"


def param_pieces(runs) -> tuple[np.ndarray, np.ndarray, str]:
    """(N_nonemb, N_emb, how) per row, N_nonemb + N_emb = the table's total N: from the table's
    registered :class:`EmbeddingCount` when it has one, else from its own non-embedding column.
    Refuses a table that has neither (naming what would do)."""
    total = np.asarray(runs.params, float)
    count = getattr(runs, "embeddings", None)
    if count is not None:
        if not runs.has("width"):
            blank = [str(n) for n, w in zip(runs.name, runs.width) if not w > 0]
            raise ValueError(f"non-embedding N needs the width of every run (column width): {len(blank)} "
                             f"have none ({', '.join(blank[:3])}{', …' if len(blank) > 3 else ''})")
        n_emb = count.embedding_params(runs.width)
        return total - n_emb, n_emb, (f"Kaplan's non-embedding N = N − {count.matrices}·{count.vocab:,}·W "
                                      f"({count.summary()})")
    own = np.asarray(runs.params_non_embedding, float)
    if runs.has("params_non_embedding"):
        return own, total - own, ("non-embedding N as the table gives it (column params_non_embedding; "
                                  "our runs write blocks and the final norm there, Kaplan's N)")
    raise ValueError("--params nonembedding needs to know which vocabulary matrices N counts: give a "
                     "params_non_embedding column (every row), or use a registered table "
                     "(`depthdelusion tables list`); valid without it: --params total")


def with_params(runs, convention: str):
    """``(runs, notes)``: the runs with ``params`` in ``convention`` (:data:`PARAM_CONVENTIONS`),
    one note saying which. ``total`` leaves the table's counts as they are."""
    if convention not in PARAM_CONVENTIONS:
        raise ValueError(f"unknown parameter-count convention {convention!r}; valid: "
                         f"{', '.join(PARAM_CONVENTIONS)}")
    if convention == "total":
        count = getattr(runs, "embeddings", None)
        said = f" as published ({count.summary()})" if count is not None else " as given"
        return runs, [f"N convention: total, the table's counts{said}"]
    n_nonemb, _, how = param_pieces(runs)
    if not np.all(n_nonemb > 0):
        bad = int(np.flatnonzero(~(n_nonemb > 0))[0])
        raise ValueError(f"non-embedding N of row {bad} ({runs.name[bad]}) is {n_nonemb[bad]:g}: the "
                         "vocabulary matrices are larger than its total N")
    return dataclasses.replace(runs, params=n_nonemb), [f"N convention: {how}"]

"""The legends of a study's figures as drawn: every legend names what is drawn, and a figure with
something drawn always has one (matplotlib warns, and the reader is left guessing, when a legend
is asked of an axis that has no labelled artist)."""
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend


def legends_while_plotting(monkeypatch, plot, *args) -> list[str]:
    """The legend texts of every figure `plot` saves, with matplotlib's warnings as errors."""
    texts = []
    save = matplotlib.figure.Figure.savefig

    def record(fig, *a, **k):
        texts.extend([t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()])
        return save(fig, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        plot(*args)
    plt.close("all")
    return texts

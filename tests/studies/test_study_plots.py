"""The studies' figures on partial results: every legend names what is drawn, and a figure
with something drawn always has one (matplotlib warns, and the reader is left guessing, when a
legend is asked of an axis that has no labelled artist)."""
import warnings
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after the backend

from depthdelusion.studies.data_exponent import study as data_exponent  # noqa: E402
from depthdelusion.studies.depth_confound import study as dc  # noqa: E402
from depthdelusion.studies.depth_confound import report as depth_confound_report  # noqa: E402


def _legends_while_plotting(monkeypatch, plot, *args):
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


def test_depth_confound_figure_names_the_arms_when_its_first_panel_is_empty(tmp_path, monkeypatch):
    spec = SimpleNamespace(widths=[16, 32], iso_flop=SimpleNamespace(width=16), metric="eval_loss")
    # W = 16 empty; arm B is drawn on the W = 32 panel, arm A only on the iso-FLOP one
    results = SimpleNamespace(spec=spec, points=(dc.Point("B", 32, 2, 4, 2e-3, (2.9,)),),
                              iso_points=(dc.Point("A", 16, 2, 4, 1e-3, (3.0,)),))
    texts = _legends_while_plotting(monkeypatch, depth_confound_report.plot, results, tmp_path / "f.png")
    assert texts == [f"{arm}: {label}" for arm, label in dc.ARMS[:2]]


def test_learning_curves_name_a_sweep_too_small_to_fit(tmp_path, monkeypatch):
    runs = [SimpleNamespace(tokens=1e6, eval_loss=3.0)]
    texts = _legends_while_plotting(monkeypatch, data_exponent.plot_learning_curves,
                                    {"builtin": (runs, None)}, tmp_path / "f.png")
    assert texts == ["builtin"]

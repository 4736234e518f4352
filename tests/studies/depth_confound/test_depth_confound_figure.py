"""The study's figure on partial results names what it draws (tests/helpers/figure_legends.py)."""
from types import SimpleNamespace

from figure_legends import legends_while_plotting

from depthdelusion.studies.depth_confound import report as depth_confound_report
from depthdelusion.studies.depth_confound import study as dc


def test_depth_confound_figure_names_the_arms_when_its_first_panel_is_empty(tmp_path, monkeypatch):
    spec = SimpleNamespace(widths=[16, 32], iso_flop=SimpleNamespace(width=16), metric="eval_loss")
    # W = 16 empty; arm B is drawn on the W = 32 panel, arm A only on the iso-FLOP one
    results = SimpleNamespace(spec=spec, points=(dc.Point("B", 32, 2, 4, 2e-3, (2.9,)),),
                              iso_points=(dc.Point("A", 16, 2, 4, 1e-3, (3.0,)),))
    texts = legends_while_plotting(monkeypatch, depth_confound_report.plot, results, tmp_path / "f.png")
    assert texts == [f"{arm}: {label}" for arm, label in dc.ARMS[:2]]

"""The study's learning-curve figure on partial results names what it draws
(tests/helpers/figure_legends.py)."""
from types import SimpleNamespace

from figure_legends import legends_while_plotting

from depthdelusion.studies.data_exponent import study as data_exponent


def test_learning_curves_name_a_sweep_too_small_to_fit(tmp_path, monkeypatch):
    runs = [SimpleNamespace(tokens=1e6, eval_loss=3.0)]
    texts = legends_while_plotting(monkeypatch, data_exponent.plot_learning_curves,
                                   {"builtin": (runs, None)}, tmp_path / "f.png")
    assert texts == ["builtin"]

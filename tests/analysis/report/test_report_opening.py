"""The report's opening sentence counts only widths that can show a depth trend."""
import numpy as np

from depthdelusion.analysis import Runs
from depthdelusion.analysis.report.markdown import opening_paragraph as _opening


def test_deepest_is_best_is_counted_over_widths_with_two_depths():
    # 10 widths; only the first has two depths, the others one run each (or two at one depth)
    depth = [2, 4] + [4] * 9 + [4]
    width = [64, 64] + [128 * (i + 1) for i in range(9)] + [128]
    loss = [3.0, 2.9] + list(np.linspace(2.8, 2.0, 9)) + [2.79]
    runs = Runs(depth=depth, width=width, params=np.full(12, 1e6), loss=loss)
    text = _opening(runs, {}, {})
    assert "At 1 of 1 widths with two depths or more (of 10) the deepest run is the best" in text


def test_every_width_with_two_depths_reads_as_before():
    runs = Runs(depth=[2, 4, 2, 4], width=[64, 64, 128, 128], params=np.full(4, 1e6),
                loss=[3.0, 2.9, 2.8, 2.7])
    assert "At 2 of 2 widths the deepest run is the best" in _opening(runs, {}, {})

"""One name for the fit's objective: ``loss=`` in Python as ``--loss`` on the command line; the
engine's older ``method=`` still works, and the two may not disagree."""
import pytest

from depthdelusion.analysis import fit
from depthdelusion.analysis.fitting.isoflop import isoflop

BARE = dict(bootstrap=0, profile=False, leave_one_out=False)


def test_fit_takes_loss_as_the_cli_names_it_and_method_still_works():
    by_loss = fit("paper", "kaplan", loss="huber", **BARE)
    by_method = fit("paper", "kaplan", method="huber", **BARE)
    assert by_loss.method == "huber" and by_loss.params == by_method.params
    assert fit("paper", "kaplan", loss="ls", **BARE).params == fit("paper", "kaplan", **BARE).params
    with pytest.raises(ValueError, match=r"unknown loss 'lm'; known: ls, huber, asymmetric"):
        fit("paper", "kaplan", loss="lm", **BARE)
    with pytest.raises(ValueError, match=r"loss='huber' and method='asymmetric' disagree"):
        fit("paper", "kaplan", loss="huber", method="asymmetric", **BARE)


def test_isoflop_takes_loss_too():
    from .test_isoflop import sweep

    res = isoflop(sweep(), bias=True, loss="huber", replicates=2)
    assert res.bias["fit_method"] == "huber"

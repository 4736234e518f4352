"""A parameter whose profile closes is identified, even where another parameter's flat
direction leaves the Jacobian's covariance undefined (issue 63, item 8: on Gemstones the kink
law's penalty acts on no shape, and α and β, whose profiles are finite, were marked "n.i.").
The table: every run shallower than any D_crit the kink law can place, so λ, κ and γ move no
prediction."""
import json

from depthdelusion.analysis import fit

from ..test_laws_and_fitting import synthetic_runs


def test_parameters_with_closed_profiles_print_beside_a_penalty_that_acts_on_no_run():
    runs = synthetic_runs(depths=(2, 3, 4, 5), widths=(512, 1024, 2048, 4096, 8192))
    r = fit(runs, "depth_delusion", bootstrap=0, leave_one_out=False)
    dead = ("lam", "kappa", "gamma")
    assert all(r.ci_profile[nm][1] == float("inf") for nm in dead)  # the premise
    for nm in ("A", "alpha", "E"):
        lo, hi = r.ci_profile[nm]
        assert lo < r.params[nm] < hi and r.status[nm] == "ok", nm
        line = next(x for x in r.summary().splitlines() if x.startswith(f"{nm} "))
        assert line.split()[1] == f"{r.params[nm]:.4g}" and f"[{lo:.4g}, {hi:.4g}]" in line
    assert all(r.status[nm] == "not_identified" for nm in dead)
    assert json.loads(r.to_json())["status"]["alpha"] == "ok"


def test_without_profiles_the_jacobian_bounds_what_it_can_beside_the_dead_penalty():
    """`--profile none`: the Jacobian's covariance is undefined only along λ, κ, γ; A, α and E
    keep their finite Jacobian intervals and are "ok" (every parameter was marked n.i., because
    each one's correlation with the dead penalty is undefined)."""
    runs = synthetic_runs(depths=(2, 3, 4, 5), widths=(512, 1024, 2048, 4096, 8192))
    r = fit(runs, "depth_delusion", bootstrap=0, leave_one_out=False, profile=False)
    dead = [nm for nm in ("lam", "kappa", "gamma") if not r.stderr[nm] < float("inf")]
    assert dead  # the premise: the Jacobian does not bound the penalty
    for nm in ("A", "alpha", "E"):
        lo, hi = r.ci_jacobian[nm]
        assert lo < r.params[nm] < hi < float("inf") and r.status[nm] == "ok", nm
    assert all(r.status[nm] == "not_identified" for nm in dead)

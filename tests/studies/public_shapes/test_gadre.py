"""The check on Gadre et al. 2024 (studies/public_shapes/gadre.py) under every N convention, from
the real runs downloaded by name through the local mirror; no bootstrap (the point fits and ε)."""
import numpy as np
import pytest

from depthdelusion.analysis.table.published_readers import GADRE_VOCAB

from tests.studies.public_shapes.test_public_shapes import PUBLISHED, mirror  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(not PUBLISHED.is_dir(), reason=f"no test copies at {PUBLISHED}")


@pytest.fixture(scope="module")
def arms(mirror):  # noqa: F811 (the fixture imported above)
    from depthdelusion.studies.public_shapes import gadre

    return gadre.measure(("total", "nonembedding", "fitted"), bootstrap=0, seed=0)


def test_each_convention_counts_n_from_gadres_untied_vocabulary(arms):
    total, kaplan, fitted = arms
    width = total.runs.width.astype(float)
    assert len(total.runs) == 95 and (total.epsilon, kaplan.epsilon) == (1.0, 0.0)
    # Kaplan's N removes both 50,432 × W matrices, not the one the files' params_no_embed leaves out
    assert np.array_equal(kaplan.runs.params, total.runs.params - 2 * GADRE_VOCAB * width)
    assert not np.allclose(kaplan.runs.params, total.runs.params_non_embedding)
    assert 0 <= fitted.epsilon <= 1 and fitted.weight is not None
    assert np.allclose(fitted.runs.params, kaplan.runs.params + fitted.epsilon * 2 * GADRE_VOCAB * width)


def test_the_csv_has_every_law_in_every_convention_and_a_status_per_parameter(arms):
    from depthdelusion.studies.public_shapes import gadre

    rows = gadre.rows(arms)
    assert {(r["n_convention"], r["law"]) for r in rows} == {
        (c, law) for c in ("total", "nonembedding", "fitted") for law in gadre.LAWS}
    assert {r["status"] for r in rows} <= {"ok", "at_bound", "not_identified"}
    # the token term is identified beside shape terms that are not: statuses are per parameter
    quadratic = {r["parameter"]: r["status"] for r in rows if (r["n_convention"], r["law"]) == ("total", "shape_quadratic")}
    assert quadratic["B"] == quadratic["beta"] == "ok" and quadratic["m"] == "not_identified"


def test_the_section_names_the_resampling_unit_each_law_per_parameter_and_the_flips(arms):
    from depthdelusion.studies.public_shapes import gadre

    text = "\n".join(gadre.section(arms))
    assert text.startswith(gadre.HEADING)
    assert "4 shapes (96×8, 512×8, 576×24, 1024×24)" in text
    assert "Resampling unit: the run, within training sets" in text and "24 of its 256" in text
    assert "| total N | shape_quadratic |" in text and "| B, beta |" in text
    assert " of " not in text.split("| bootstrap kept |")[1].split("\n\n")[0]  # no "k of n" blanket count
    for convention in ("total", "nonembedding", "fitted"):
        assert f"- **{convention} N:**" in text
    assert "The best law flips between the N conventions" in text


def test_the_laws_that_fit_one_value_per_shape_are_found_saturated_and_said_so(arms):
    from depthdelusion.studies.public_shapes import gadre

    total, kaplan, fitted = arms
    saturated = {(a.convention, g.law) for a in arms for g in a.fits if gadre.saturated(a, g)}
    # N is one value per shape: the shape laws reach one free value per shape where no bound holds them
    assert saturated == {(c, law) for c in ("total", "fitted") for law in ("shape_quadratic", "gemstones_width_depth")}
    quadratic = {a.convention: next(g for g in a.fits if g.law == "shape_quadratic").fit.rss for a in arms}
    assert quadratic["total"] == pytest.approx(quadratic["fitted"], rel=1e-9) == pytest.approx(total.shape_rss, rel=1e-9)
    text = "\n".join(gadre.section(arms))
    assert "Saturated: shape_quadratic on total, fitted N; gemstones_width_depth on total, fitted N." in text
    assert "measures only the other's lack of fit across the 4 shape means" in text and "are not evidence" in text
    assert "| total N | shape_quadratic | +0.0 | 0.1084 | saturated |" in text
    # the fitted-ε verdict says ε was tuned for chinchilla and held in every law and draw
    assert "ε held at chinchilla's optimum in every law and draw; its uncertainty not propagated" in text
    assert "chinchilla's margin here is partly by construction" in text


def test_a_parameter_that_is_not_ok_has_no_interval_in_the_csv(arms):
    from depthdelusion.studies.public_shapes import gadre

    rows = gadre.rows(arms)
    kink = [r for r in rows if r["law"] == "depth_delusion" and r["parameter"] in ("lam", "kappa", "gamma")]
    assert kink and all(r["status"] == "not_identified" and r["ci95_low"] == r["ci95_high"] == "" for r in kink)


def test_a_parameter_not_identified_prints_no_value_and_one_at_its_bound_prints_the_bound(arms):
    """A not-identified value is one point of a ridge (under another OpenBLAS kernel the saturated
    shape_quadratic's m came out 1.41, not 1.33): the CSV prints none; at a bound it prints the
    bound itself (Kaplan's N: E[c4_original] at 0, not the solver's last bits)."""
    from depthdelusion.studies.public_shapes import gadre

    rows = gadre.rows(arms)
    assert all(r["value"] == "" for r in rows if r["status"] == "not_identified")
    bound = [r for r in rows if r["status"] == "at_bound"]
    assert bound and all(r["value"] == 0.0 for r in bound if r["parameter"].startswith(("E", "A")))
    assert all(isinstance(r["value"], float) for r in rows if r["status"] == "ok")
    assert all((r["ci95_low"] == "") == (r["status"] != "ok") for r in rows)


def test_the_best_law_flips_only_where_the_sets_within_the_margin_differ(arms):
    from depthdelusion.studies.public_shapes import gadre

    # total and Kaplan's N: chinchilla and shape_quadratic within ΔAICc 2 under both — no flip
    two = "\n".join(gadre.section(arms[:2])).split("RMSE of chinchilla by tokens")[-1]
    assert "flips" not in two and "the same under every count: chinchilla ≈ shape_quadratic" in two
    assert "Parameter statuses that change between counts: chinchilla E[c4_original]" in two
    assert "verdicts flip" not in two
    three = "\n".join(gadre.section(arms))
    assert "chinchilla ≈ shape_quadratic on total N, nonembedding N; chinchilla on fitted N. On fitted N ε was tuned" in three

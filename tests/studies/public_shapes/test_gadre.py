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
    assert "Between the N conventions" in text

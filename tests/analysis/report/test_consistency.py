import numpy as np

from depthdelusion.analysis import Runs, load_reference
from depthdelusion.analysis.report.consistency import CONVENTIONS, audit_param_counts


def test_paper_table_inconsistencies_are_found_from_the_data():
    audit = audit_param_counts(load_reference("depth_delusion"))
    assert audit.best == {"baseline": "paper_baseline", "large_scale": "paper_large_scale"}
    assert [f.name for f in audit.findings] == ["56Lx2176"]
    (row,) = audit.findings
    assert round(row.implied_width) == 2048 and abs(row.rel_error) > 0.1
    assert any("mixes parameter-count conventions" in t for t in audit.table_findings)
    assert any("no D/W column" in u for u in audit.unchecked)


def _table(depths, widths, params, group="g"):
    n = len(depths)
    return Runs(depths, widths, params, np.full(n, 3.0), np.full(n, np.nan), np.full(n, np.nan),
                [group] * n, [f"{d}x{w}" for d, w in zip(depths, widths)])


def test_a_consistent_table_has_no_findings():
    fn = CONVENTIONS["blocks_plus_embeddings"][1]
    D, W = np.array([4, 8, 16, 32]), np.array([512, 768, 1024, 2048])
    audit = audit_param_counts(_table(D, W, fn(D, W)))
    assert audit.best["g"] == "blocks_plus_embeddings" and not audit.findings and not audit.table_findings


def test_a_wrong_row_and_a_wrong_depth_width_ratio_are_flagged():
    fn = CONVENTIONS["paper_large_scale"][1]
    D, W = np.array([16, 24, 40, 64]), np.array([3840, 3072, 2432, 2816])
    N = fn(D, W).astype(float)
    N[1] *= 1.05
    ratio = D / W
    ratio[3] = 0.0221  # 64/2896, as printed in the paper
    audit = audit_param_counts(_table(D, W, N), depth_width_ratio=ratio)
    assert [f.name for f in audit.findings] == ["24x3072"]
    assert len(audit.ratio_findings) == 1 and "64/2896" in audit.ratio_findings[0]

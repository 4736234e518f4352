"""Reference data bundled with the package (provenance in ``reference/PROVENANCE.md``): the
paper's constants and reported fit, and its data files. The paper's runs are read as a
:class:`.runs.Runs` table by :func:`.runs.load_reference` (also the named source ``"paper"`` of
:func:`.load.load_runs`); this module imports nothing else of the package.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REFERENCE_DIR = Path(__file__).with_name("reference")
DATASETS = {"depth_delusion": "depth_delusion_runs.csv", "llm_shapes": "llm_shapes.csv"}

#: Tokens per baseline run stated in the paper's text; large-scale budgets are not given per run.
PAPER_BASELINE_TOKENS = 6.4e9
#: The paper's tokenizer and vocabulary (GPT-2 BPE): its losses are in nats per token.
PAPER_TOKENIZER = "gpt2"
#: Standard errors (nats) the paper gives for six large-scale runs (§4.6), by (depth, width).
PAPER_LOSS_SE = {(24, 1792): 0.008, (80, 1024): 0.011, (40, 2432): 0.006,
                 (72, 1792): 0.009, (32, 4096): 0.006, (64, 2816): 0.008}
#: The paper's reported fit, for side-by-side comparison: value, 95% interval.
PAPER_FIT = {
    "persistence_exponent": (0.44, (0.38, 0.50)),
    "kappa": (2.43, (2.09, 2.77)),
    "alpha": (0.22, (-0.21, 0.65)),
    "lam": (0.18, (0.05, 0.31)),
    "gamma": (0.35, (0.12, 0.58)),
    "r2": (0.922, None),
}
PAPER_KAPPA = PAPER_FIT["kappa"][0]  # D_crit = κ ln W
PAPER_PERSISTENCE_EXPONENT = PAPER_FIT["persistence_exponent"][0]  # ℓ ∝ W^p
PAPER_PERSISTENCE_R2 = {"power": 0.982, "log": 0.595}
PAPER_SHAPE_EXPONENTS = {"depth": 0.12, "width": 0.34}


@dataclass
class ModelShapes:
    """Published model shapes: name, depth (layers), width (model dim), params (total, as published)."""

    model: list
    depth: np.ndarray
    width: np.ndarray
    params: np.ndarray

    def __len__(self) -> int:
        return len(self.model)


def load_llm_shapes() -> ModelShapes:
    """Published LLM shapes (``reference/llm_shapes.csv``)."""
    with open(REFERENCE_DIR / DATASETS["llm_shapes"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    return ModelShapes(model=[r["model"] for r in rows],
                       depth=np.array([int(r["depth"]) for r in rows]),
                       width=np.array([int(r["width"]) for r in rows]),
                       params=np.array([float(r["params_billions"]) * 1e9 for r in rows]))

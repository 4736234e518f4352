"""Synthetic tables for the fitting benchmarks, from Epoch AI's Chinchilla fit (Besiroglu et
al. 2024: E 1.82, A 482, alpha 0.3478, B 2085, beta 0.3658).

- ``chinchilla_rows(n)``: N log-uniform in [1e7, 1e10], D (tokens) in [1e8, 1e11], loss with
  N(0, 0.02²) noise.
- ``grouped_runs(n, groups)``: the same law with one offset per group (E + 0.02·g), as a
  published table with a model-family column.
"""
import numpy as np

EPOCH = dict(E=1.82, A=482.0, alpha=0.3478, B=2085.0, beta=0.3658)


def _loss(N, T, E):
    p = EPOCH
    return E + p["A"] / N ** p["alpha"] + p["B"] / T ** p["beta"]


def chinchilla_rows(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    N = 10 ** rng.uniform(7, 10, n)
    T = 10 ** rng.uniform(8, 11, n)
    loss = _loss(N, T, EPOCH["E"]) + rng.normal(0, 0.02, n)
    return {"params": N, "tokens": T, "loss": loss}


def grouped_runs(n: int = 300, groups: int = 11, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    g = np.arange(n) % groups
    N = 10 ** rng.uniform(7, 10, n)
    T = 10 ** rng.uniform(8, 11, n)
    loss = _loss(N, T, EPOCH["E"] + 0.02 * g) + rng.normal(0, 0.02, n)
    return {"params": N, "tokens": T, "loss": loss, "group": np.array([f"family{i}" for i in g], dtype=object)}


def write_csv(table: dict, path) -> None:
    cols = list(table)
    with open(path, "w") as f:
        f.write(",".join(cols) + "\n")
        for row in zip(*(table[c] for c in cols)):
            f.write(",".join(v if isinstance(v, str) else repr(float(v)) for v in row) + "\n")

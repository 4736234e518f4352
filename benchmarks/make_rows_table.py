"""Write a large run table for the fit benchmark: n rows drawn from Epoch AI's Chinchilla fit
with N(0, 0.02²) noise (``synth_tables.chinchilla_rows``, seed 0), as CSV (params,tokens,loss).

    PYTHONPATH=. python benchmarks/make_rows_table.py OUT.csv [--rows 3000000]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from synth_tables import chinchilla_rows  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=3_000_000)
    args = ap.parse_args()
    t = chinchilla_rows(args.rows)
    # repr-exact floats (17 significant digits), as synth_tables.write_csv writes them, without
    # a Python object per row
    np.savetxt(args.out, np.column_stack([t["params"], t["tokens"], t["loss"]]), delimiter=",",
               fmt="%.17g", header="params,tokens,loss", comments="")
    print(f"{args.rows} rows -> {args.out}")


if __name__ == "__main__":
    main()

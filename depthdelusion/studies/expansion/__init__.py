"""Depth expansion (docs/depth_expansion.md): `surgery` inserts zero-output blocks into a trained
run, `probe` measures the first-order descent signal of an inserted block, `study` runs the
study end to end, `commands` holds the `expand` and `expansion-study` handlers."""

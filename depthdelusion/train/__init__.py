"""Training: optimizer, the sharded train step with per-layer statistics, the loop, records."""

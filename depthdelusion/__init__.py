"""depthdelusion: train decoder-only transformers over depth x width grids and fit
architecture-conditioned scaling laws (see README.md and docs/architecture.md)."""

__version__ = "0.1.0"

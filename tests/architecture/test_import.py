import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_analysis_imports_without_jax():
    # A fresh interpreter, so imports done by other tests cannot hide a JAX import.
    code = ("import sys, depthdelusion.cli, depthdelusion.rundir, depthdelusion.analysis, depthdelusion.analysis.report.build, "
            "depthdelusion.analysis.commands, depthdelusion.analysis.table.columns; "
            "print('jax' in sys.modules, 'flax' in sys.modules, 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.stdout.split() == ["False", "False", "False"]

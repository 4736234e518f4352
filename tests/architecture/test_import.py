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


def test_no_command_loads_jax_for_its_help():
    """`depthdelusion --help` loads no JAX, nor does `depthdelusion COMMAND --help` for any command:
    a help reads its defaults from the options declaration (a study's options.py, not the module
    that runs it), and neither may load JAX (coord-check, spectrum, persistence-probe and
    data-exponent-ridge once did, 5–12 s per help)."""
    code = ("import contextlib, io, sys\n"
            "from depthdelusion.cli import COMMANDS, main\n"
            "loaded = []\n"
            "for argv in [['--help']] + [[name, '--help'] for name, *_ in COMMANDS]:\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "        main(argv)\n"
            "    if 'jax' in sys.modules:\n"
            "        loaded.append(' '.join(argv))\n"
            "        break\n"
            "print(','.join(loaded) or 'none')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert out.stdout.strip() == "none", f"`{out.stdout.strip()}` (the first such help) loads JAX"

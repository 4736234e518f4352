"""`python -m depthdelusion.cli ...` is the same as the `depthdelusion` command."""
import sys

from depthdelusion.cli import main

sys.exit(main())

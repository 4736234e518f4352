"""`python -m depthdelusion ...` is the same as the `depthdelusion` command."""
import sys

from depthdelusion.cli import main

if __name__ == "__main__":  # a spawned worker imports this module too
    sys.exit(main())

"""``python -m pytest_torchcompile``: the command line of :mod:`pytest_torchcompile.cli`."""

import sys

from pytest_torchcompile.cli import main

if __name__ == "__main__":
    sys.exit(main())

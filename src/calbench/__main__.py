"""``python -m calbench``: the command line of :mod:`calbench.cli`."""

import sys

from calbench.cli import main

if __name__ == "__main__":
    sys.exit(main())

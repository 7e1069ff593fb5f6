"""The checkout's entry point, ``python cli.py ...``: a thin shim over graphexec.cli.

The command line lives in graphexec/cli/; the installed console script ``graphexec`` and
``python -m graphexec`` run the same :func:`main`. This file is not installed.
"""

import sys

from graphexec.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())

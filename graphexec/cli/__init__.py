"""The graphexec command line: parses arguments, calls the API, prints. Nothing else.

``graphexec ...`` (the console script), ``python -m graphexec ...`` and the checkout's
``python cli.py ...`` all run :func:`main`.
"""

from graphexec.cli.app import main, parser

__all__ = ["main", "parser"]

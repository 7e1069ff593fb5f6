"""``python -m graphexec ...``: the command line."""

import sys

from graphexec.cli import main

sys.exit(main())

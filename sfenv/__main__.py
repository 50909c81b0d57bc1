"""``python -m sfenv``: the command line."""

import sys

from sfenv.cli import main

sys.exit(main())

"""``python -m sfenv``: the command line."""

import sys

from sfenv.app.cli import main

sys.exit(main())

"""``python -m unbranch``: the same command line as ``unbranch``."""

import sys

from .cli import main

sys.exit(main())

"""``python -m evaluation.run``."""

import sys

from evaluation.run.cli import main

sys.exit(main())

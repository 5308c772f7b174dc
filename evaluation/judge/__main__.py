"""``python -m evaluation.judge``."""

import sys

from evaluation.judge.cli import main

sys.exit(main())

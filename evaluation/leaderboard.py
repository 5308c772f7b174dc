"""``python -m evaluation.leaderboard DIR...`` (see :mod:`evaluation.report.leaderboard`)."""

import sys

from evaluation.report.leaderboard import main

if __name__ == "__main__":
    sys.exit(main())

"""``python -m evaluation.leaderboard DIR...`` (see :mod:`evaluation.report.across_runs.leaderboard`)."""

import sys

from evaluation.report.across_runs.leaderboard import main

if __name__ == "__main__":
    sys.exit(main())

"""``python -m evaluation.compare DIR_A DIR_B`` (see :mod:`evaluation.report.across_runs.compare`)."""

import sys

from evaluation.report.across_runs.compare import main

if __name__ == "__main__":
    sys.exit(main())

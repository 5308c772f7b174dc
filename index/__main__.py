"""``python -m index``: crawl servers, import LiveMCPBench's snapshot, build and search the index."""

from __future__ import annotations

import sys

from index.cli.args import main

if __name__ == "__main__":
    sys.exit(main())

import sys

from bench.retrieval import main

sys.exit(main())

"""``python -m evaluation.run``."""

import sys

from evaluation.run.cli import main
from index.children.containment.secrecy import protect_secrets

# The runner holds the agent's API key and is an ancestor of every child server its copilots start.
protect_secrets()
sys.exit(main())

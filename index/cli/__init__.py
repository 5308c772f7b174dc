"""Command lines of ``python -m index``: argument parsing, the search command, and how output for people looks."""

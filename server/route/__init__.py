"""``route``: its answer, its generated description, and background indexing of new servers."""

"""The persistent index: the Chroma store, building it from a catalog, and what the last build used."""

"""Knowing the tools: server lists, crawling, catalog snapshots, the search index.

Nothing heavy happens at import time; the embedding model and Chroma load on first use.
"""

"""Searching the index: query forms, tool text, BM25 and dense signals, their fusion and confidence."""

"""The pool of persistent child sessions and its settings."""

"""Asking the judge model: ``prompts`` (LiveMCPEval's and our evidence variant), ``completions``
(cache first, one endpoint probe, bounded concurrency), ``cache`` (one file per reply) and
``verdicts`` (strict reading of what it answers)."""

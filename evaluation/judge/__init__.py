"""Judging: LiveMCPEval verdicts for logged trajectories (``python -m evaluation.judge``).

``options`` (what the judge is asked to do), ``judging`` (one task's verdict), ``pipeline``
(a whole run: plan, judge, report), ``prompts`` and ``verdicts`` (what is asked and how replies
are read), ``verdict_log`` (``verdicts.jsonl``), ``cache``/``completions`` (the LLM client),
``outputs`` (the files the judge writes, recognised when a later judge searches a tree holding them).
"""

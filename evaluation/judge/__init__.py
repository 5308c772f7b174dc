"""Judging: LiveMCPEval verdicts for logged trajectories (``python -m evaluation.judge``).

``options`` (what the judge is asked to do), ``judging`` (one task's verdict), ``pipeline``
(a whole run: plan, judge, report), ``repeats`` (each repeat of a run, then pass@k),
``verdict_log`` (``verdicts.jsonl``), ``tool_descriptions`` (what the judge is told of the tools),
``outputs`` and ``lock`` (the files the judge writes, recognised when a later judge searches a tree
holding them, and one judge per output directory); ``prompting`` asks the judge model.
"""

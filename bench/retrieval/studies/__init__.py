"""Retrieval side studies, each run on its own against the shipped ranker on every query set:
``python -m bench.retrieval.studies.NAME [--home DIR]`` (LiveMCPBench data as for ``bench retrieval``).

:mod:`~bench.retrieval.studies.harness` is what they share (the query sets, the lab's spaces, paired
comparisons); the rest is one method each: ``adapter``, ``coverage``, ``expansion``,
``interaction``, ``learned``, ``providers``, ``reduction``, ``usage``.
"""

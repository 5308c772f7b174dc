"""Benchmarking agents through the copilot: ``run`` (agents on LiveMCPBench tasks), ``judge``
(LiveMCPEval verdicts), ``report`` (reports, viewer, repeats, compare, leaderboard),
``taxonomy`` (why tasks failed), and the shared ``trajectories``, ``tasks`` and ``llm``."""

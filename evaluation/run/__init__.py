"""Running agents on benchmark tasks through the copilot (``python -m evaluation.run``).

``cli`` (options and the run's life cycle), ``runner`` (one task after another: workspace, agent,
trajectory), ``tasks`` and ``models`` (the task list, ``summary.json``), ``layout`` and
``run_lock`` (where a run's results go, one run per directory), ``summary_view`` (the closing
table); ``agents`` (the built-in MCP Copilot Agent, ``--agent-cmd``, confirmations, bounded agent
logs) and ``task_setup`` (each task's workspace, its child servers' home, how it launches the
copilot, the index made ready first).
"""

"""Running agents on benchmark tasks through the copilot (``python -m evaluation.run``).

``cli`` (options and the run's life cycle), ``runner`` (one task after another: workspace, agent,
trajectory), ``tasks`` and ``models`` (the task list, ``summary.json``), ``agent`` (the built-in
MCP Copilot Agent), ``external_agent`` (``--agent-cmd``), ``copilot_launch`` (how a task starts
the copilot), ``workspace`` and ``child_home`` (what each task's child servers see).
"""

"""What each task runs in: its private workspace (``workspace``), a home for its child servers
(``child_home``), how it launches the copilot (``copilot_launch``), and the index made ready before
the first task (``index_ready``). Nothing is imported here.
"""

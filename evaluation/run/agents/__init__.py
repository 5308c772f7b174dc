"""The agents a run drives: the built-in MCP Copilot Agent (``agent``), any agent as a command
(``external_agent``), who answers the copilot's confirmation questions (``confirm``), and an
agent's log kept to a bounded size (``bounded_log``). Nothing is imported here.
"""

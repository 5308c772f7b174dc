"""Trajectory logs: the records and the writer, one JSONL file per MCP session."""

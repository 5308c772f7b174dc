"""Talking to child MCP servers: starting or reaching them, their processes, transports and errors.

Shared by the crawler (one short session per server) and the copilot's child pool (one long-lived
session per server). ``connect.open_session`` is the entry point; ``stdio`` and ``remote`` are the
transports, ``wire`` reads a stdio child's stdout defensively, ``process`` owns a stdio child's
process tree and stderr log, ``containment`` decides what a child inherits, keeps the copilot's
secrets from it and makes sure no child outlives the copilot, ``errors`` the failures, ``tool_listing`` lists a child's tools without the ones whose definitions are broken,
``listing_limits`` bounds every listing of a child (tools, prompts, resources).
Nothing is imported here, so importing the package stays cheap.
"""

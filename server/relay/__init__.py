"""Relaying between the MCP host and child servers through ``execute``, in both protocol eras.

- :mod:`server.relay.host`: one ``execute`` request's host -- era, capabilities, progress, logs, questions;
- :mod:`server.relay.call`: one child call's relay (what the child sends during the call);
- :mod:`server.relay.suspended`: calls kept across 2026-07-28 ``input_required`` rounds;
- :mod:`server.relay.confirm`: confirming risky calls through elicitation;
- :mod:`server.relay.roots`: which directories the user works in;
- :mod:`server.relay.disconnect`: noticing that an HTTP client went away;
- :mod:`server.relay.hub`: the copilot's relay object and its host-facing handlers.
"""

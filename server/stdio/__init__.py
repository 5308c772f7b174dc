"""Serving the copilot over stdio: the SDK's transport on pipes, and ``execute``'s fast path beside it."""

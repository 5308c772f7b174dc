"""Keeping children contained: what a child inherits of the copilot's environment (``environment``,
an allowlist minus credentials), keeping the copilot's own secrets out of its reach (``secrecy``),
and making sure no child, nor anything it starts, outlives the copilot (``guard``, with the
``guardian`` and ``watchdog`` programs it runs by path). Nothing is imported here.
"""

"""Benchmarks of the copilot as a proxy between host and child: ``relay`` (``execute`` through the
copilot vs the host calling the child directly), ``bare_proxy`` and ``raw_hop`` (the floors it is
compared with), ``exposure`` (the context a host pays per ``COPILOT_EXPOSE`` mode) and
``conformance`` (the official MCP conformance suite through the copilot). Run them as
``python -m bench relay`` (and so on). Nothing is imported here.
"""

"""The copilot as an aggregating proxy: the children's prompts, resources and tools as hosts see them.

``names`` (collision-free namespacing), ``catalog`` (host-facing views of the index),
``exposure`` (``COPILOT_EXPOSE``), ``live`` (re-indexing changed children), ``notify``
(list_changed in both protocol eras), ``pages`` (cursors), ``service`` (the MCP handlers),
``subscriptions`` (resource subscriptions), ``coalesce`` (one resource's flood of updates as a few).
"""

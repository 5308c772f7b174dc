"""Reporting: a judged run as ``report.json``/``.md``/``.html`` and CSV (``build``, ``models``,
``tables``, ``plots``, ``render``, ``viewer``, ``export``, ``files``, with ``stats``); several runs
side by side are in ``across_runs``."""

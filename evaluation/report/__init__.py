"""Reporting: a judged run as ``report.json``/``.md``/``.html`` (``build``, ``models``, ``tables``,
``plots``, ``render``, ``files``), and runs side by side (``compare``, ``stats``)."""

"""Trust in child servers: definition pins (rug-pull detection), the poisoning scan, quarantine.

``definition`` says what a tool's pinned definition is and how a change is described,
``scan`` finds tool-poisoning attacks in definitions and injection markers in results,
``store`` keeps approved pins and pending changes under ``COPILOT_HOME/trust``, ``review``
decides per listed tool (prompt, resource template) whether it may be used, ``approval`` takes
only the definition a person reviewed, and ``cli`` is ``python -m index trust`` /
``python -m index approve``.
"""

"""Judged runs side by side: ``compare`` (two runs, paired), ``leaderboard`` (many, with the
cost-success frontier), ``repeats``/``repeats_render`` (repeats of one agent: pass@k) and
``significance`` (the ``--alpha`` both comparisons test at)."""

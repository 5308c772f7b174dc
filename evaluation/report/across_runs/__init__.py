"""Judged runs side by side: ``compare`` (two runs, paired), ``leaderboard`` (many, with the
cost-success frontier) and ``repeats``/``repeats_render`` (repeats of one agent: pass@k)."""

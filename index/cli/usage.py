"""``python -m index usage``: learn the usage prior ``route`` adds from trajectory logs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from index.cli.display import counted, printable
from index.errors import ConfigError
from index.settings import CopilotSettings
from index.usage.learning import learn_usage, successful_tasks
from index.usage.prior import write_usage_prior


def usage_command(args: argparse.Namespace) -> int:
    if args.show < 0:
        raise ConfigError(f"--show must be 0 or more (got {args.show}).")
    settings = CopilotSettings.load()
    paths = [Path(p) for p in args.paths] or [settings.logs_dir]
    verdicts = None
    problems: list[str] = []
    if args.successful is not None:
        verdicts, problems = successful_tasks(args.successful)
    learned = learn_usage(paths, verdicts=verdicts)
    problems += learned.problems
    for problem in problems:
        print(f"warning: {printable(problem)}", file=sys.stderr)
    reasons = [f"{counted(learned.unsuccessful, 'trajectory', 'trajectories')} not judged a success"] if learned.unsuccessful else []
    if verdicts is not None and learned.unjudged:
        another = " (is it another run's verdicts?)" if not learned.files else ""
        reasons.append(f"{counted(learned.unjudged, 'trajectory', 'trajectories')} of tasks with no verdict in {verdicts.path}{another}")
    left_out = f"left out: {'; '.join(reasons)}" if reasons else ""
    if not learned.files:
        shown = ", ".join(str(p) for p in paths)
        raise ConfigError(
            f"no trajectory to learn from under {shown}{f' ({left_out})' if left_out else ''}; nothing written. Pass "
            "the copilot's log directory (COPILOT_LOG_DIR, default COPILOT_HOME/logs) or a benchmark run's directory."
        )
    prior = learned.prior
    out = args.out or settings.usage_prior_file
    left_out = f"; {left_out}" if left_out else ""
    print(
        f"learned from {counted(learned.files, 'trajectory', 'trajectories')} ({counted(learned.executes, 'execute call')}"
        f"{left_out}): {counted(prior.tool_total, 'tool')} of {counted(len(prior.tools), 'server')} ran without error"
    )
    ranked = sorted(
        ((count, server, tool) for server, tools in prior.tools.items() for tool, count in tools.items()),
        key=lambda item: (-item[0], item[1], item[2]),
    )
    if ranked and args.show:
        print("most used: " + ", ".join(f"{printable(s)}/{printable(t)} {n}" for n, s, t in ranked[: args.show]))
    try:
        write_usage_prior(prior, out)
    except OSError as error:
        raise ConfigError(f"{out}: cannot write the usage prior ({error.strerror or error}); pass --out FILE.") from None
    if settings.usage_prior_weight > 0:
        use = (
            f"route adds {settings.usage_prior_weight:g} x log(1 + trajectories) to a tool's score "
            "(COPILOT_USAGE_PRIOR_WEIGHT; 0 turns it off)"
        )
    else:
        use = "COPILOT_USAGE_PRIOR_WEIGHT is 0, so route does not use it until that is set"
    if args.out is not None and out != settings.usage_prior_file:
        use += f"; route reads {settings.usage_prior_file}, so set COPILOT_USAGE_PRIOR={out} to use this one"
    print(f"wrote {out}: {use}")
    return 1 if problems else 0

"""Reading trajectories -- the copilot's JSONL logs and LiveMCPBench's published JSON files --
into one typed :class:`Trajectory` per task (``model``), from ``copilot`` logs or ``livemcpbench``
files, found by ``loading``. Malformed input is skipped and reported, never fatal."""

from evaluation.trajectories.livemcpbench import entry_problem, livemcpbench_trajectory, looks_like_livemcpbench
from evaluation.trajectories.loading import load_trajectories
from evaluation.trajectories.model import (
    CONFIRMATION_REQUIRED,
    RUN_BROKE_KINDS,
    UNAVAILABLE_KINDS,
    Confirmation,
    LoadResult,
    Problem,
    ToolCall,
    Trajectory,
    UsageTotals,
)

__all__ = [
    "CONFIRMATION_REQUIRED",
    "RUN_BROKE_KINDS",
    "UNAVAILABLE_KINDS",
    "Confirmation",
    "LoadResult",
    "Problem",
    "ToolCall",
    "Trajectory",
    "UsageTotals",
    "entry_problem",
    "livemcpbench_trajectory",
    "load_trajectories",
    "looks_like_livemcpbench",
]

"""How many threads torch runs a forward pass on: the cores no other thread is using, at most its own number.

torch starts with one thread per core, and its threads wait for each other at every layer. When
another process wants a core -- a child server at work, the agent, another task's copilot, a test
worker -- that wait is a scheduler's time slice: on this 2-core machine, with one busy process
beside it, a ``route`` query took 58-209 ms at p50 on two threads against 16-19 ms on one, and an
int8 tool text 420-435 ms against 37 ms (libgomp's spin already shortened by
:func:`index.models.embedding.force_offline`). Idle, two threads are faster (a query 14 ms against
15-18 ms, a tool text 24 against 35 ms). So each forward pass first counts the threads of other
processes that are running or ready to run (``/proc/loadavg`` less this process's own, from
``/proc/self/task``, read only when the machine-wide count is above one: ~30 us idle) and takes the
cores left, at least one and at most torch's own number. Where that count cannot be read (not
Linux), one thread: the choice that never collapses.

torch keeps its thread count per OS thread (OpenMP): the embedder sets it in the thread that runs
the forward pass, under its call lock, and only when it differs (setting it costs ~0.15 ms).
"""

from __future__ import annotations

import os
import threading
from typing import Literal

ThreadPolicy = Literal["free-cores", "own", "one"]

#: ``free-cores`` (shipped); ``own`` (torch's own number, as before) and ``one`` are ``bench speed``'s baselines.
POLICY: ThreadPolicy = "free-cores"

_LOADAVG = "/proc/loadavg"
_OWN_TASKS = "/proc/self/task"

_own: int | None = None
_cores: int | None = None
_lock = threading.Lock()


def own_threads() -> int:
    """torch's own thread count for this process, as it was before a forward pass first changed it."""
    global _own
    if _own is not None:  # every forward pass asks: no lock once it is known
        return _own
    with _lock:
        if _own is None:
            import torch

            _own = torch.get_num_threads()
        return _own


def usable_cores() -> int:
    """The cores this process may run on (its affinity, where the system has one)."""
    global _cores
    if _cores is None:
        affinity = getattr(os, "sched_getaffinity", None)
        _cores = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    return _cores


def other_running_threads() -> int | None:
    """Threads of other processes running or ready to run on the machine; ``None`` where unknown."""
    try:
        with open(_LOADAVG, "rb") as loadavg:
            running = int(loadavg.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None
    if running <= 1:  # the caller, reading it, is one of them
        return 0
    # This process's own threads are no competitors: the caller, and torch's workers of the last
    # pass, which spin a moment before they sleep (counted, back-to-back passes took one thread
    # every other time on an idle machine).
    return max(0, running - _own_running_threads(running))


def _own_running_threads(at_most: int) -> int:
    """This process's threads that are running or ready to run (at least the caller), counted up
    to ``at_most`` (the machine's: no more can be running)."""
    running = 0
    try:
        tasks = os.listdir(_OWN_TASKS)
    except OSError:
        return 1
    for task in tasks:
        if running >= at_most:
            break
        try:
            with open(f"{_OWN_TASKS}/{task}/stat", "rb") as stat:
                text = stat.read()
        except OSError:  # ended meanwhile
            continue
        end_of_name = text.rfind(b")")  # the state follows the name, which may hold anything
        running += text[end_of_name + 2 : end_of_name + 3] == b"R"
    return max(1, running)


def threads_for(own: int, cores: int, others: int | None, policy: ThreadPolicy = "free-cores") -> int:
    """Threads for the next forward pass: the free cores, at least one, at most ``own``."""
    if policy == "own":
        return own
    if policy == "one" or others is None:
        return 1
    return max(1, min(own, cores - others))


def use_free_cores() -> None:
    """Set this OS thread's torch thread count for its next forward pass (see the module's doc)."""
    import torch

    own = own_threads()
    # One thread of its own (OMP_NUM_THREADS=1, one core) leaves nothing to count.
    others = other_running_threads() if own > 1 and POLICY == "free-cores" else None
    wanted = threads_for(own, usable_cores(), others, POLICY)
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)

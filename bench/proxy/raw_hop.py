"""The extra process hop alone: the relay benchmark's lower bound, not a product.

``python -m bench.proxy.raw_hop COMMAND [ARGS...]`` starts ``COMMAND`` and copies bytes between its own
stdin/stdout and the command's, unread and unparsed, on two threads blocked in ``os.read``. A host
talks to the command through it exactly as it would directly (the same ``tools/call``), so what
``bench relay`` measures for it is the price of one more process on the way: two more pipe
crossings, each waking another process. Every proxy pays that before it reads a byte; the
copilot's own work is what it adds beyond it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

_CHUNK = 1 << 16
#: Seconds the command may take to exit once its output has ended.
_EXIT_WAIT = 10.0


def _copy(source: int, target: int) -> None:
    """Bytes from ``source`` to ``target`` until ``source`` ends (or ``target`` is closed)."""
    try:
        while chunk := os.read(source, _CHUNK):
            view = memoryview(chunk)
            while view:
                view = view[os.write(target, view) :]
    except OSError:
        pass  # the other side went away: the hop ends with it


def main(argv: list[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if not command:
        print("usage: python -m bench.proxy.raw_hop COMMAND [ARGS...]", file=sys.stderr)
        return 2
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    to_child, from_child = child.stdin, child.stdout
    assert to_child is not None and from_child is not None

    def upstream() -> None:
        _copy(sys.stdin.fileno(), to_child.fileno())
        to_child.close()  # the child sees the end of its input, as it would without the hop

    threading.Thread(target=upstream, daemon=True).start()
    _copy(from_child.fileno(), sys.stdout.fileno())
    try:
        return child.wait(timeout=_EXIT_WAIT)
    except subprocess.TimeoutExpired:  # it closed its output but lingers
        child.kill()
        return child.wait()


if __name__ == "__main__":
    sys.exit(main())

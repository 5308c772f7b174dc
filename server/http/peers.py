"""Whether an HTTP request comes from one of the copilot's own child servers (Linux).

A child server runs as the copilot's user on the same machine, so it can reach an HTTP copilot on
loopback, and a bearer token is no obstacle: a token file, a ``.env`` or a host's config holding
it is readable by every process of that user. Through the copilot a hostile server would call
the other servers' tools -- with the keys their entries hold, which isolation keeps it from
reading -- and answer their confirmations itself, in a session of its own. So a request whose
connection is held by a process in the copilot's tree is refused.

The other end of a TCP connection is found the way ``ss -p`` finds it: the inode of the client's
socket from the kernel's socket diagnostics (netlink ``SOCK_DIAG``), then the process among the
copilot's descendants that has that socket open. A socket's inode stays the same while it is
open, so the verdict is kept per inode and the descendants are searched once per connection.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import sys
from collections import OrderedDict

import anyio

from index.children.containment.guard import descendants
from server.settings import is_loopback_host, plain_address

logger = logging.getLogger(__name__)

#: The kernel's socket diagnostics over netlink (what ``ss`` uses): one exact lookup takes ~30 us,
#: where reading ``/proc/net/tcp`` took 5 ms here (it walks the whole connection table).
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_ALL_STATES = 0xFFFFFFFF
_NO_COOKIE = (0xFFFFFFFF, 0xFFFFFFFF)
_DIAG_TIMEOUT = 2.0
#: Verdicts kept (one per connection seen): enough for every connection an HTTP copilot keeps open.
_KEPT = 4096


Endpoint = tuple[str, int]


def connection_inode(client: Endpoint, server: Endpoint) -> int | None:
    """The inode of the client's socket of the TCP connection ``client -> server``, when the
    client's end is on this machine (a remote client's socket is in no table here)."""
    try:
        source, destination = plain_address(client[0]), plain_address(server[0])
    except ValueError:
        return None
    if source.version != destination.version:
        return None
    family = socket.AF_INET if source.version == 4 else socket.AF_INET6
    padded = [address.packed.ljust(16, b"\0") for address in (source, destination)]
    # struct inet_diag_sockid: ports and addresses in network order, any interface, no cookie.
    sockid = struct.pack("!HH", client[1], server[1]) + padded[0] + padded[1] + struct.pack("=III", 0, *_NO_COOKIE)
    request = struct.pack("=BBBxI", family, socket.IPPROTO_TCP, 0, _ALL_STATES) + sockid
    message = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + request
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
            diag.settimeout(_DIAG_TIMEOUT)
            diag.sendto(message, (0, 0))
            answer = diag.recv(8192)
        _length, kind = struct.unpack_from("=IH", answer)
        if kind != _SOCK_DIAG_BY_FAMILY:  # NLMSG_ERROR: no such connection here (ENOENT)
            return None
        # nlmsghdr (16), then inet_diag_msg: family/state/timer/retrans (4), the sockid (48),
        # expires/rqueue/wqueue/uid (16), inode.
        return struct.unpack_from("=I", answer, 16 + 4 + 48 + 16)[0] or None
    except (OSError, struct.error):
        return None


def descendant_holding(inode: int) -> int | None:
    """The pid of the copilot's descendant that has the socket ``inode`` open, if one has."""
    wanted = f"socket:[{inode}]"
    for process in descendants(os.getpid()):
        directory = f"/proc/{process.pid}/fd"
        try:
            descriptors = os.listdir(directory)
        except OSError:  # gone meanwhile, or not ours to read
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(f"{directory}/{descriptor}") == wanted:
                    return process.pid
            except OSError:
                continue
    return None


class ChildPeers:
    """Remembers, per connection, whether one of the copilot's child processes holds its other end."""

    def __init__(self) -> None:
        self._verdicts: OrderedDict[int, int | None] = OrderedDict()
        self._warned = False
        self.available = sys.platform.startswith("linux") and hasattr(socket, "AF_NETLINK")

    async def child_at(self, client: Endpoint, server: Endpoint) -> int | None:
        """The pid of the copilot's descendant at the other end of this connection, if any: the
        socket's lookup on the event loop, the first search for a connection in a worker thread
        (each later request of a kept-alive connection reads the verdict kept)."""
        inode = self.client_socket(client, server)
        if inode is None:
            return None
        known, holder = self._known(inode)
        return holder if known else await anyio.to_thread.run_sync(self._search, inode)

    def client_socket(self, client: Endpoint, server: Endpoint) -> int | None:
        """The inode of the connection's client socket (~30 us: quick enough for the event loop)."""
        if not self.available:
            return None
        inode = connection_inode(client, server)
        if inode is None and not self._warned and is_loopback_host(client[0]):  # a local client is always found
            self._warned = True
            logger.warning(
                "cannot tell which process is at the other end of a loopback connection (the kernel's socket "
                "diagnostics, netlink SOCK_DIAG, did not find it): child servers are not kept from using this copilot"
            )
        return inode

    def _known(self, inode: int) -> tuple[bool, int | None]:
        """Whether the connection of ``inode`` was searched already, and the descendant found then."""
        if inode in self._verdicts:
            self._verdicts.move_to_end(inode)
            return True, self._verdicts[inode]
        return False, None

    def _search(self, inode: int) -> int | None:
        """Search the copilot's descendants for ``inode`` (milliseconds: run it off the event loop)."""
        holder = descendant_holding(inode)
        self._verdicts[inode] = holder
        while len(self._verdicts) > _KEPT:
            self._verdicts.popitem(last=False)
        return holder

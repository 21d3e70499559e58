"""A listening socket that refuses connections over max_connection_creation_rate inside
accept(), before the event loop makes anything of them.

asyncio's accept path turns every accepted socket into a transport and a protocol (about
twice what accepting and closing it costs) and takes up to a whole listen backlog of them
in one turn of the loop, while every other connection waits for the next turn. Refused
here, a connection over the rate costs its accept() and close() only, and never reaches
the loop. Which connections are refused is decided by `minibroker.connection_rate`.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

# (client address, monotonic seconds) -> whether the connection may stay
Admit = Callable[[str, float], bool]


class RateLimitedSocket(socket.socket):
    """accept() returns only connections `admit` lets in; it closes the others at once."""

    __slots__ = ("admit",)

    admit: Admit

    def accept(self) -> tuple[socket.socket, object]:
        admit = self.admit
        while True:
            fd, address = self._accept()  # type: ignore[attr-defined]
            if admit(str(address[0]) if address else "", time.monotonic()):
                return socket.socket(self.family, self.type, self.proto, fileno=fd), address
            socket.close(fd)  # BlockingIOError once none is left ends the loop


async def bind(host: str, port: int, admit: Admit) -> RateLimitedSocket | None:
    """A socket listening on (host, port) that admits through `admit`, or None when the
    host names several addresses (the event loop then listens on each itself)."""
    found = {
        (family, address)
        for family, _, _, _, address in await asyncio.get_running_loop().getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    }
    if len(found) != 1:
        return None
    ((family, address),) = found
    plain = socket.create_server(address, family=family, backlog=100)
    sock = RateLimitedSocket(family, socket.SOCK_STREAM, fileno=plain.detach())
    sock.admit = admit
    sock.setblocking(False)
    return sock

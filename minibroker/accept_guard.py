"""A listener out of descriptors: reported once, not per failed accept().

When accept() fails for want of descriptors (EMFILE, ENFILE) or of kernel memory (ENOBUFS,
ENOMEM), asyncio's selector loop stops watching the listening socket, tries again a second
later, and hands every failure to the loop's exception handler, whose default logs each
with a traceback: thousands of lines a minute while the process stays out of descriptors.
Connections already accepted are served meanwhile; new ones wait in the listen backlog and
are accepted once descriptors come back.

An AcceptGuard takes those reports for the listening sockets of one node: the first is
logged at once, then one line per REPORT_INTERVAL counting the failures, and a line when
none has come for RECOVERED_AFTER seconds (the listener accepts again). Every other report
goes on to the handler the loop had before.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

from minibroker.throttled_log import ThrottledLog

log = logging.getLogger("minibroker.server")

# What asyncio's selector loop reports when accept() fails for want of resources.
ACCEPT_FAILURE = "socket.accept() out of system resource"
REPORT_INTERVAL = 10.0  # seconds between the lines counting failures
RECOVERED_AFTER = 3.0  # seconds without a failure: asyncio retries every second


class _Socket(Protocol):
    def fileno(self) -> int: ...


class AcceptGuard:
    def __init__(self, name: str) -> None:
        self.name = name  # how the log names the node
        self.failures = 0  # accept() calls failed for want of resources, since the start
        self._throttle = ThrottledLog(REPORT_INTERVAL)
        self._episode = 0  # failures since the listener last accepted
        self._recovery: asyncio.TimerHandle | None = None
        self._handler: _LoopHandler | None = None
        self._sockets: list[int] = []

    def watch(self, loop: asyncio.AbstractEventLoop, sockets: Iterable[_Socket]) -> None:
        """Take the accept() failure reports of `sockets` (listening) on `loop`."""
        self._handler = _LoopHandler.of(loop)
        self._sockets = [sock.fileno() for sock in sockets]
        for fd in self._sockets:
            self._handler.guards[fd] = self

    def unwatch(self) -> None:
        if self._recovery is not None:
            self._recovery.cancel()
            self._recovery = None
        if self._handler is not None:
            for fd in self._sockets:
                if self._handler.guards.get(fd) is self:
                    del self._handler.guards[fd]
            self._handler.release()
            self._handler = None
        self._sockets = []

    def failed(self, loop: asyncio.AbstractEventLoop, exc: BaseException | None) -> None:
        """One accept() failed for want of resources."""
        self.failures += 1
        self._episode += 1
        count = self._throttle.occurred(loop.time())
        if count == 1 and self._episode == 1:
            log.error(
                "%s: cannot accept connections: %s; open connections are served, new ones "
                "wait and are accepted when descriptors free up (retried every second)",
                self.name,
                exc,
            )
        elif count is not None:
            log.error(
                "%s: still cannot accept connections: %d failed accept() calls since the "
                "last report (%s)",
                self.name,
                count,
                exc,
            )
        if self._recovery is not None:
            self._recovery.cancel()
        self._recovery = loop.call_later(RECOVERED_AFTER, self._recovered)

    def _recovered(self) -> None:
        self._recovery = None
        log.warning(
            "%s: accepting connections again (%d failed accept() calls)",
            self.name,
            self._episode,
        )
        self._episode = 0
        self._throttle = ThrottledLog(REPORT_INTERVAL)


class _LoopHandler:
    """The exception handler installed on a loop while guards watch its listeners."""

    _installed: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopHandler] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.previous = loop.get_exception_handler()
        self.guards: dict[int, AcceptGuard] = {}  # listening descriptor -> its guard

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> _LoopHandler:
        handler = cls._installed.get(loop)
        if handler is None or loop.get_exception_handler() is not handler:
            handler = cls._installed[loop] = cls(loop)
            loop.set_exception_handler(handler)
        return handler

    def release(self) -> None:
        """Uninstall when no guard is left (unless another handler replaced this one)."""
        if self.guards:
            return
        if self.loop.get_exception_handler() is self:
            self.loop.set_exception_handler(self.previous)
        if _LoopHandler._installed.get(self.loop) is self:
            del _LoopHandler._installed[self.loop]

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        guard = None
        sock = context.get("socket")
        if context.get("message") == ACCEPT_FAILURE and sock is not None:
            guard = self.guards.get(sock.fileno())
        if guard is not None:
            guard.failed(loop, context.get("exception"))
        elif self.previous is not None:
            self.previous(loop, context)
        else:
            loop.default_exception_handler(context)

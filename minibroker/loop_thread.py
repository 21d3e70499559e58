"""An event loop in a background thread, for synchronous callers of asyncio services
(Cluster, RecordingProxy): `with service:` / `start_in_thread()` run the service's async
start() there, and calls from other threads are handed to that loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")
Self = TypeVar("Self", bound="RunsInThread")


class LoopThread:
    """An event loop running in a daemon thread, for synchronous callers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="minibroker-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Any, timeout: float | None = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call(self, function: Callable[[], T], timeout: float | None = 30) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def invoke() -> None:
            try:
                future.set_result(function())
            except BaseException as exc:
                future.set_exception(exc)

        self.loop.call_soon_threadsafe(invoke)
        return future.result(timeout)

    @property
    def is_current(self) -> bool:
        return threading.current_thread() is self._thread

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class RunsInThread:
    """`start_in_thread()`, `stop_thread()` and `with` for a service with async start()
    and stop(); `_on_loop(function)` runs function on the service's loop."""

    _thread: LoopThread | None = None

    async def start(self) -> Any:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    def start_in_thread(self: Self) -> Self:
        """Start on a background event loop; for synchronous code."""
        if self._thread is None:
            self._thread = LoopThread()
            try:
                self._thread.run(self.start())
            except BaseException:
                self._thread.close()
                self._thread = None
                raise
        return self

    def stop_thread(self) -> None:
        if self._thread is not None:
            self._thread.run(self.stop())
            self._thread.close()
            self._thread = None

    def __enter__(self: Self) -> Self:
        return self.start_in_thread()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop_thread()

    def _on_loop(self, function: Callable[[], T]) -> T:
        if self._thread is not None and not self._thread.is_current:
            return self._thread.call(function)
        return function()

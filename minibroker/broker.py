"""The public `Broker`: one node, usable from async code or from plain synchronous code.

    async with Broker() as broker:          # runs on the current event loop
        ...
    with Broker() as broker:                # runs its own loop in a background thread
        ...
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar

from minibroker.config import BrokerConfig
from minibroker.dispatch import RequestRecord
from minibroker.server import NodeServer
from minibroker.state.clock import Clock
from minibroker.state.cluster import ClusterState
from minibroker.state.topics import Topic

log = logging.getLogger("minibroker")
T = TypeVar("T")


class _LoopThread:
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


class Broker:
    """A single Kafka broker speaking the wire protocol on `host:port` (0 picks a port)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        node_id: int = 0,
        **settings: Any,
    ) -> None:
        base = config or BrokerConfig()
        self.config = dataclasses.replace(base, host=host, port=port, **settings)
        self.state = ClusterState(self.config, clock)
        self._server = NodeServer(
            self.state, node_id, self.config.host, self.config.port, self.config.advertised_host
        )
        self._thread: _LoopThread | None = None
        self._running = False

    # --- lifecycle ---

    async def start(self) -> Broker:
        await self._server.start()
        self._running = True
        log.info("minibroker ready, bootstrap.servers=%s", self.bootstrap_servers)
        return self

    async def stop(self) -> None:
        if self._running:
            self._running = False
            await self._server.stop()

    async def __aenter__(self) -> Broker:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def start_in_thread(self) -> Broker:
        """Start on a background event loop; for synchronous test code."""
        if self._thread is None:
            self._thread = _LoopThread()
            self._thread.run(self.start())
        return self

    def stop_thread(self) -> None:
        if self._thread is not None:
            self._thread.run(self.stop())
            self._thread.close()
            self._thread = None

    def __enter__(self) -> Broker:
        return self.start_in_thread()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop_thread()

    # --- information ---

    @property
    def node_id(self) -> int:
        return self._server.node_id

    @property
    def host(self) -> str:
        return self._server.advertised_host

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connection_count(self) -> int:
        return self._server.connection_count

    def recent_requests(self) -> list[RequestRecord]:
        return list(self._server.dispatcher.recent)

    # --- admin, callable from any thread ---

    def _on_loop(self, function: Callable[[], T]) -> T:
        if self._thread is not None and not self._thread.is_current:
            return self._thread.call(function)
        return function()

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
    ) -> Topic:
        """Create a topic; raises TopicError (with a Kafka error code) if it cannot."""

        def create() -> Topic:
            topic = self.state.topics.create(name, partitions, configs=configs)
            assert topic is not None
            return topic

        return self._on_loop(create)

    def delete_topic(self, name: str) -> None:
        self._on_loop(lambda: self.state.topics.delete(name))

    def topics(self) -> list[str]:
        return self._on_loop(self.state.topics.names)

    def end_offsets(self, topic: str) -> dict[int, int]:
        def read() -> dict[int, int]:
            found = self.state.topics.get(topic)
            if found is None:
                return {}
            return {p.index: p.log.high_watermark for p in found.partitions}

        return self._on_loop(read)

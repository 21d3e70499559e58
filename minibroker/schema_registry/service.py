"""The Schema Registry as a running service: the state, its topic and its HTTP listener.

Writes run one at a time: read what other registries wrote (catch up), check the command
against the state, append its records, and answer once they have been read back. A
command that lost a race with another registry runs again. A read that would answer "not
found" first catches up once, so that a schema another registry process has just
registered is found.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from minibroker.loop_thread import RunsInThread
from minibroker.schema_registry import api, errors
from minibroker.schema_registry.http_server import HttpServer
from minibroker.schema_registry.state import Lost, RegistryState, Reply
from minibroker.schema_registry.store import DEFAULT_TOPIC, SchemasTopic

log = logging.getLogger("minibroker.schema_registry")

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
RETRIES_AFTER_LOST_RACE = 8


class SchemaRegistry(RunsInThread):
    """A Confluent-compatible Schema Registry on `bootstrap_servers`' `_schemas` topic.

    `await registry.start()` in asyncio code, or `with SchemaRegistry(...) as registry:`
    (a loop of its own in a thread) in synchronous code; then `registry.url`.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        topic: str = DEFAULT_TOPIC,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        client_config: dict[str, Any] | None = None,
    ) -> None:
        self.state = RegistryState()
        self._host = host
        self._topic = SchemasTopic(
            bootstrap_servers, self.state.apply, topic=topic, client_config=client_config
        )
        self._http = HttpServer(self._answer, host, port, max_body_bytes)
        self._writing = asyncio.Lock()

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._http.port}"

    async def start(self) -> SchemaRegistry:
        await self._topic.start()
        try:
            await self._http.start()
        except BaseException:
            await self._topic.stop()
            raise
        log.info("schema registry ready, schema.registry.url=%s", self.url)
        return self

    async def stop(self) -> None:
        await self._http.stop()
        await self._topic.stop()

    async def _answer(self, method: str, target: str, body: bytes) -> tuple[int, bytes]:
        request = api.Request(method, target, body)
        try:
            reply = await self._outcome(request)
        except errors.RegistryError as refusal:
            return refusal.http_status, json.dumps(refusal.body()).encode()
        except (TimeoutError, RuntimeError) as exc:
            failure = errors.RegistryError(500, errors.STORE_ERROR, f"Error while storing: {exc}")
            return 500, json.dumps(failure.body()).encode()
        payload = reply.body
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return reply.status, text.encode()

    async def _outcome(self, request: api.Request) -> Reply:
        if request.method == "GET":
            try:
                outcome = api.handle(self.state, request)
            except errors.RegistryError as refusal:
                if refusal.http_status != 404:
                    raise
                await self._topic.catch_up()
                outcome = api.handle(self.state, request)
            assert isinstance(outcome, Reply)
            return outcome
        async with self._writing:
            for _ in range(RETRIES_AFTER_LOST_RACE):
                await self._topic.catch_up()
                outcome = api.handle(self.state, request)
                if isinstance(outcome, Reply):
                    return outcome
                await self._topic.append(outcome.records)
                try:
                    return outcome.answer(self.state)
                except Lost:
                    continue
        raise errors.RegistryError(
            500, errors.STORE_ERROR, "Another registry kept writing the same ids; try again"
        )

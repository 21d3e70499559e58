"""The Schema Registry as a running service: the state, its topic and its HTTP listener.

Writes run one at a time: read what other registries wrote (catch up), check the command
against the state, append its records, and answer once they have been read back. A
command that lost a race with another registry runs again. A read that would answer "not
found" first catches up once, so that a schema another registry process has just
registered is found.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from minibroker.http_edge import HttpServer
from minibroker.http_edge import Request as HttpRequest
from minibroker.http_edge import Response as HttpResponse
from minibroker.loop_thread import RunsInThread
from minibroker.schema_registry import api, errors
from minibroker.schema_registry.state import Lost, RegistryState, Reply
from minibroker.schema_registry.store import DEFAULT_TOPIC, SchemasTopic

log = logging.getLogger("minibroker.schema_registry")
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
T = TypeVar("T")

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
# The schema-registry extra: the schema parsers, imported when a schema is first parsed.
PARSERS = ("fastavro", "avro", "jsonschema", "google.protobuf", "proto_schema_parser")
INSTALL_HINT = "pip install 'minibroker[schema-registry]'"
RETRIES_AFTER_LOST_RACE = 8


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


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
        create_topic: bool = True,
    ) -> None:
        self.state = RegistryState()
        self._host = host
        # The state is read and changed on one thread of its own: parsing a large schema
        # (Protobuf text parses at tens of KiB a second) must not hold up the event loop
        # the broker serves Kafka clients on.
        self._state_thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="minibroker-schema-registry"
        )
        self._topic = SchemasTopic(
            bootstrap_servers,
            self._apply,
            topic=topic,
            client_config=client_config,
            create_topic=create_topic,
        )
        self._http = HttpServer(
            self._answer_http,
            host,
            port,
            max_body_bytes,
            error_content_type=CONTENT_TYPE,
            name="the schema registry",
        )
        self._writing = asyncio.Lock()

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._http.port}"

    async def start(self) -> SchemaRegistry:
        missing = [name for name in PARSERS if not _installed(name)]
        if missing:
            raise RuntimeError(f"the Schema Registry needs {', '.join(missing)}: {INSTALL_HINT}")
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
        self._state_thread.shutdown(wait=False, cancel_futures=True)

    async def _on_state_thread(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._state_thread, function, *args)

    async def _apply(self, records: list[tuple[bytes, bytes | None]]) -> None:
        def apply_all() -> None:
            for key, value in records:
                self.state.apply(key, value)

        await self._on_state_thread(apply_all)

    async def _answer_http(self, request: HttpRequest) -> HttpResponse:
        status, body = await self._answer(request.method, request.target, request.body)
        return HttpResponse(status, body, CONTENT_TYPE)

    async def _answer(self, method: str, target: str, body: bytes) -> tuple[int, bytes]:
        request = api.Request(method, target, body)
        try:
            reply = await self._outcome(request)
        except errors.RegistryError as refusal:
            return refusal.http_status, json.dumps(refusal.body()).encode()
        except TimeoutError:
            failure = errors.RegistryError(
                500, errors.OPERATION_TIMEOUT, "The _schemas topic did not answer in time"
            )
            return 500, json.dumps(failure.body()).encode()
        except RuntimeError as exc:
            failure = errors.RegistryError(500, errors.STORE_ERROR, f"Error while storing: {exc}")
            return 500, json.dumps(failure.body()).encode()
        payload = reply.body
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return reply.status, text.encode()

    async def _outcome(self, request: api.Request) -> Reply:
        if request.method == "GET":
            try:
                outcome = await self._on_state_thread(api.handle, self.state, request)
            except errors.RegistryError as refusal:
                if refusal.http_status != 404:
                    raise
                await self._topic.catch_up()
                outcome = await self._on_state_thread(api.handle, self.state, request)
            assert isinstance(outcome, Reply)
            return outcome
        async with self._writing:
            for _ in range(RETRIES_AFTER_LOST_RACE):
                await self._topic.catch_up()
                outcome = await self._on_state_thread(api.handle, self.state, request)
                if isinstance(outcome, Reply):
                    return outcome
                await self._topic.append(outcome.records)
                try:
                    return await self._on_state_thread(outcome.answer, self.state)
                except Lost:
                    winners = await self._on_state_thread(self._winners, outcome.records)
                    await self._topic.append(winners)
                    continue
        raise errors.RegistryError(
            500, errors.STORE_ERROR, "Another registry kept writing the same ids; try again"
        )

    def _winners(
        self, written: list[tuple[bytes, bytes | None]]
    ) -> list[tuple[bytes, bytes | None]]:
        return [
            record for key, _ in written if (record := self.state.current_record(key)) is not None
        ]

"""The `_schemas` topic, read and written through a Kafka client (the edge).

The registry keeps nothing else: at start it reads the topic from the beginning, then
tails it; a change is appended and answered once it has been read back, so a second
registry on the same topic (in another process, or against a real Kafka) converges on
the same state, as Confluent's registries do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from minibroker.schema_registry.records import Record

log = logging.getLogger("minibroker.schema_registry")

DEFAULT_TOPIC = "_schemas"


class SchemasTopic:
    def __init__(
        self,
        bootstrap_servers: str,
        apply: Callable[[list[Record]], Awaitable[None]],
        *,
        topic: str = DEFAULT_TOPIC,
        client_config: dict[str, Any] | None = None,
        create_topic: bool = True,
    ) -> None:
        self._bootstrap = bootstrap_servers
        self._create = create_topic
        self._apply = apply
        self.topic = topic
        self._partition = TopicPartition(topic, 0)
        # A short backoff: the first metadata of a topic just created is retried quickly.
        self._config = {"retry_backoff_ms": 10, **(client_config or {})}
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        # End offsets are asked on a connection of their own: on the reader's, they would
        # queue behind its long-polling fetch.
        self._probe: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self.position = 0  # the next offset to apply
        self._moved = asyncio.Event()
        self._failure: BaseException | None = None

    async def start(self) -> None:
        if self._create:
            await self._create_topic()
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=500,
            client_id="minibroker-schema-registry",
            **self._config,
        )
        self._consumer.assign([self._partition])
        await self._consumer.start()
        await self._consumer.seek_to_beginning(self._partition)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            acks="all",
            client_id="minibroker-schema-registry",
            **self._config,
        )
        await self._producer.start()
        self._probe = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            enable_auto_commit=False,
            client_id="minibroker-schema-registry",
            **self._config,
        )
        await self._probe.start()
        self._reader = asyncio.create_task(self._read_forever())
        await self.catch_up()

    async def _create_topic(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap, **self._config)
        await admin.start()
        try:
            topic = NewTopic(self.topic, 1, 1, topic_configs={"cleanup.policy": "compact"})
            await admin.create_topics([topic])
        except TopicAlreadyExistsError:
            pass
        finally:
            await admin.close()

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        for client in (self._producer, self._probe, self._consumer):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.stop()

    async def _read_forever(self) -> None:
        assert self._consumer is not None
        try:
            while True:
                batches = await self._consumer.getmany(self._partition, timeout_ms=500)
                messages = batches.get(self._partition, [])
                if messages:
                    await self._apply([(m.key, m.value) for m in messages if m.key is not None])
                    self.position = messages[-1].offset + 1
                    self._moved.set()
                    self._moved = asyncio.Event()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the topic cannot be read: answers fail with 50001
            log.exception("the schema registry stopped reading %s", self.topic)
            self._failure = exc
            self._moved.set()

    async def wait_for(self, position: int, timeout: float = 30.0) -> None:
        """Until every record before `position` has been applied."""
        async with asyncio.timeout(timeout):
            while self.position < position:
                if self._failure is not None:
                    raise RuntimeError(f"{self.topic} cannot be read: {self._failure}")
                await self._moved.wait()

    async def catch_up(self) -> None:
        """Read what other writers appended up to now."""
        assert self._probe is not None
        ends = await self._probe.end_offsets([self._partition])
        await self.wait_for(ends[self._partition])

    async def append(self, records: list[Record]) -> None:
        """Write records, then wait until they have been read back and applied."""
        assert self._producer is not None
        last = -1
        for key, value in records:
            metadata = await self._producer.send_and_wait(self.topic, value, key, partition=0)
            last = metadata.offset
        await self.wait_for(last + 1)

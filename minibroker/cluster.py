"""`Cluster`: N broker nodes in one process sharing one cluster state.

Each node listens on its own port. Partition leaders are spread over the nodes round
robin (each partition's replicas and ISR as docs/replicas.md says), Metadata reports them
truthfully, and a node asked for a partition it does not lead answers
NOT_LEADER_OR_FOLLOWER, so clients exercise their routing for real.

    async with Cluster(brokers=3) as cluster:     # on the current event loop
        ...
    with Cluster(brokers=3) as cluster:           # own loop in a background thread
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from minibroker.config import PLAINTEXT, BrokerConfig, Listener
from minibroker.dispatch import RequestRecord
from minibroker.faults import Faults
from minibroker.housekeeping import Housekeeping
from minibroker.inspection import Recorded, Recording
from minibroker.loop_thread import RunsInThread
from minibroker.protocol import oauthbearer
from minibroker.protocol.consumer_protocol import encode_assignment, parse_assignment
from minibroker.protocol.recording import kafka_api_name
from minibroker.server import NodeServer
from minibroker.state import acl
from minibroker.state.clock import BrokerClock, Clock
from minibroker.state.cluster import CLOCK_ADVANCED, ClusterState
from minibroker.state.credentials import read_users_file
from minibroker.state.share_groups import ShareGroupView, share_group_view
from minibroker.state.topics import Topic
from minibroker.storage.data_dir import DataDir

if TYPE_CHECKING:
    from minibroker.console import Console
    from minibroker.schema_registry.service import SchemaRegistry

log = logging.getLogger("minibroker")
T = TypeVar("T")
Self = TypeVar("Self", bound="Cluster")


def host_port(host: str, port: int) -> str:
    """HOST:PORT as clients parse it: an IPv6 address goes in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Cluster(RunsInThread):
    """N Kafka broker nodes on loopback ports (port 0 picks free ones)."""

    def __init__(
        self,
        brokers: int = 3,
        host: str = "127.0.0.1",
        ports: list[int] | None = None,
        *,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        **settings: Any,
    ) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if ports is not None and len(ports) != brokers:
            raise ValueError(f"{brokers} brokers need {brokers} ports, got {len(ports)}")
        base = config or BrokerConfig()
        self.config = dataclasses.replace(base, host=host, **settings)
        self.state = ClusterState(self.config, clock)
        self.state.credentials.add_all(self._users(self.config))
        self.state.credentials.bearer = oauthbearer.BearerValidation(
            self.state.clock.wall_ms,
            self.config.sasl_oauthbearer_principal_claim,
            tuple((self.config.sasl_oauthbearer_required_scope or "").split()),
            self.config.sasl_oauthbearer_validator,
        )
        chosen_ports = ports or [self.config.port if brokers == 1 else 0] * brokers
        self.nodes = [
            NodeServer(
                self.state,
                node_id,
                self.config.host,
                port,
                self.config.advertised_host,
                listeners=self._listeners_of(node_id),
                advertised=self._advertised_of(node_id),
            )
            for node_id, port in enumerate(chosen_ports)
        ]
        self._housekeeping = Housekeeping(self.state)
        self._on_advance: Callable[[], None] = lambda: None
        self._running = False
        self._data_dir: DataDir | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._record_file: TextIO | None = None  # record_requests(to=...)
        self._schema_registry: SchemaRegistry | None = None
        self._console: Console | None = None
        self._recorded_lines = 0

    @staticmethod
    def _users(config: BrokerConfig) -> dict[str, str]:
        users = read_users_file(config.sasl_users_file) if config.sasl_users_file else {}
        users.update(config.sasl_users or {})
        return users

    def _listeners_of(self, node_id: int) -> list[Listener] | None:
        """Node `node_id`'s listeners: `listeners`, a fixed port moved up by the node id."""
        if self.config.listeners is None:
            return None
        return [
            dataclasses.replace(x, port=x.port + node_id if x.port else 0)
            for x in self.config.listener_list()
        ]

    def _advertised_of(self, node_id: int) -> dict[str, tuple[str, int]]:
        return {
            name: (host, port + node_id if port else 0)
            for name, (host, port) in self.config.advertised_addresses().items()
        }

    def add_user(self, name: str, password: str) -> None:
        """Let `name` sign in over SASL (PLAIN and SCRAM) with `password`, or change its
        password. Connections already signed in stay so."""
        self._on_loop(lambda: self.state.credentials.add_user(name, password))

    def remove_user(self, name: str) -> bool:
        """Stop `name` signing in over SASL; False if there was no such user."""
        return self._on_loop(lambda: self.state.credentials.remove_user(name))

    def add_acl(
        self,
        resource_type: str,
        resource_name: str,
        principal: str,
        *,
        operation: str,
        permission: str = "ALLOW",
        pattern: str = "LITERAL",
        host: str = "*",
    ) -> None:
        """Store an ACL, as CreateAcls does (names as Kafka spells them:
        `add_acl("TOPIC", "orders", "User:alice", operation="WRITE")`); it takes effect
        with `acls_enabled`. ValueError for one Kafka would refuse."""
        try:
            binding = acl.AclBinding(
                acl.ResourceType[resource_type.upper()],
                resource_name,
                acl.PatternType[pattern.upper()],
                principal,
                host,
                acl.Operation[operation.upper()],
                acl.Permission[permission.upper()],
            )
        except KeyError as exc:
            raise ValueError(f"unknown ACL name {exc}") from None
        self._on_loop(lambda: self.state.acls.add(binding))

    def bootstrap_servers_for(self, listener: str) -> str:
        """HOST:PORT of every node on the listener named `listener` (e.g. SASL_SSL)."""
        name = listener.upper()
        if name not in self.nodes[0].addresses:
            known = ", ".join(self.nodes[0].addresses) or "none (not started)"
            raise ValueError(f"no listener named {listener!r}: {known}")
        return ",".join(host_port(*node.addresses[name]) for node in self.nodes)

    # --- lifecycle ---

    async def start(self: Self) -> Self:
        started: list[NodeServer] = []
        self._open_data_dir()
        try:
            for node in self.nodes:
                await node.start()
                started.append(node)
            self._housekeeping.start()
            loop = asyncio.get_running_loop()

            def wake_timers() -> None:  # advance() may be called from any thread
                loop.call_soon_threadsafe(self.state.announce, CLOCK_ADVANCED)

            self._on_advance = wake_timers
            self.state.clock.on_advance.append(self._on_advance)
            if self.config.serves_schema_registry and self._schema_registry is None:
                await self._start_schema_registry()
            if self.config.console_port >= 0 and self._console is None:
                await self._start_console()
        except BaseException:
            for node in started:
                await node.stop()
            if self._data_dir is not None:
                self._data_dir.close()
            raise
        if self._data_dir is not None and self.config.log_flush == "interval":
            self._flusher = asyncio.create_task(self._flush_every_interval(self._data_dir))
        self._running = True
        log.info("minibroker ready, bootstrap.servers=%s", self.bootstrap_servers)
        return self

    async def stop(self) -> None:
        if self._running:
            self._running = False
            with contextlib.suppress(ValueError):
                self.state.clock.on_advance.remove(self._on_advance)
            if self._console is not None:
                await self._console.stop()
                self._console = None
            if self._schema_registry is not None:
                await self._schema_registry.stop()
                self._schema_registry = None
            await self._housekeeping.stop()
            for node in self.nodes:
                await node.stop()
            if self._flusher is not None:
                self._flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._flusher
                self._flusher = None
            if self._data_dir is not None:
                self._data_dir.close()
            self._close_record_file()

    async def _start_schema_registry(self) -> None:
        plaintext = [
            listener.name
            for listener in self.config.listener_list()
            if listener.security_protocol == PLAINTEXT
        ]
        if not plaintext:
            raise ValueError("the Schema Registry needs a PLAINTEXT listener to reach the broker")
        try:  # imported only when asked for
            from minibroker.schema_registry.service import SchemaRegistry
            from minibroker.schema_registry.store import DEFAULT_TOPIC
        except ImportError as exc:
            raise RuntimeError(
                f"the Schema Registry needs {exc.name}: pip install 'minibroker[schema-registry]'"
            ) from exc

        if self.state.topics.get(DEFAULT_TOPIC) is None:  # made here: quicker than an admin client
            self.state.topics.create(DEFAULT_TOPIC, 1, configs={"cleanup.policy": "compact"})
        registry = SchemaRegistry(
            self.bootstrap_servers_for(plaintext[0]),
            self.config.host,
            max(self.config.schema_registry_port, 0),
            max_body_bytes=self.config.schema_registry_max_body_bytes,
            create_topic=False,
        )
        await registry.start()
        self._schema_registry = registry

    async def _start_console(self) -> None:
        from minibroker.console import Console

        registry = self._schema_registry

        def schema_of(schema_id: int) -> tuple[str, str] | None:
            stored = None if registry is None else registry.state.schemas.get(schema_id)
            return None if stored is None else (stored.schema_type, stored.text)

        if self.nodes[0].dispatcher.recording is None:  # the console shows the timeline
            self.record_requests()
        console = Console(
            self,
            self.config.host,
            self.config.console_port,
            allow_changes=self.config.console_allow_changes,
            schema_lookup=None if registry is None else schema_of,
        )
        await console.start()
        self._console = console

    @property
    def console_url(self) -> str:
        """http://HOST:PORT of the web console (`console_port` >= 0)."""
        if self._console is None:
            raise RuntimeError("no console: start the broker with console_port (0 picks a port)")
        return self._console.url

    @property
    def schema_registry_url(self) -> str:
        """http://HOST:PORT of the Schema Registry (`schema_registry=True`)."""
        if self._schema_registry is None:
            raise RuntimeError(
                "no Schema Registry: start the broker with schema_registry=True "
                "(or --schema-registry-port)"
            )
        return self._schema_registry.url

    def _open_data_dir(self) -> None:
        """Load the data directory (the first start) or take it again (a restart)."""
        if self.config.data_dir is None:
            return
        if self._data_dir is None:
            self._data_dir = DataDir(
                self.config.data_dir,
                self.config.log_flush,
                max_open_segment_files=self.config.max_open_segment_files,
                connections=self.config.max_connections * len(self.nodes),
            )
        self._data_dir.open(self.state, [node.node_id for node in self.nodes])

    async def _flush_every_interval(self, data_dir: DataDir) -> None:
        interval = self.config.log_flush_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                data_dir.sync()
            except OSError as exc:
                data_dir.storage_error("syncing", exc)

    async def __aenter__(self: Self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- information ---

    @property
    def clock(self) -> BrokerClock:
        """The brokers' clock: `clock.advance(seconds)` moves their time forward, so
        session timeouts and the like expire at once (clients keep real time)."""
        return self.state.clock

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(host_port(node.advertised_host, node.port) for node in self.nodes)

    @property
    def connection_count(self) -> int:
        return sum(node.connection_count for node in self.nodes)

    def recent_requests(self) -> list[RequestRecord]:
        # tuple() copies a deque in one step under the GIL, so the broker's thread can
        # keep appending (a Python-level loop over it could fail mid-iteration).
        records = [r for node in self.nodes for r in tuple(node.dispatcher.recent)]
        return sorted(records, key=lambda r: r.at)

    # --- faults and cluster operations (docs/faults.md) ---

    @property
    def faults(self) -> Faults:
        """The fault rules (minibroker/faults.py): `cluster.faults.add("Produce",
        error=6, times=2)`; thread-safe."""
        return self.state.faults

    def node(self, node_id: int) -> NodeServer:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise ValueError(f"no broker {node_id} (brokers: {[n.node_id for n in self.nodes]})")

    async def stop_node(self, node_id: int) -> None:
        """Stop broker `node_id`: its connections close and new ones are refused; its
        partitions and groups fail over to the running brokers; all data is kept."""
        node = self.node(node_id)
        await node.stop()
        self.state.node_stopped(node_id)

    async def start_node(self, node_id: int) -> None:
        """Start a stopped broker again on its port (it leads nothing until moved to)."""
        await self.node(node_id).start()

    def stop_broker(self, node_id: int) -> None:
        """`stop_node` for synchronous code (a cluster run with `with` or
        start_in_thread())."""
        self._in_thread(self.stop_node(node_id), "stop_node")

    def start_broker(self, node_id: int) -> None:
        """`start_node` for synchronous code."""
        self._in_thread(self.start_node(node_id), "start_node")

    def _in_thread(self, coroutine: Coroutine[Any, Any, None], instead: str) -> None:
        if self._thread is None or self._thread.is_current:
            coroutine.close()
            raise RuntimeError(
                f"this cluster runs on your event loop: use `await cluster.{instead}(...)`"
            )
        self._thread.run(coroutine)

    def move_leader(self, topic: str, partition: int, node_id: int) -> None:
        """Partition `partition` of `topic` is led by `node_id` from now on (next leader
        epoch); its old leader answers NOT_LEADER_OR_FOLLOWER."""
        self._on_loop(lambda: self.state.move_leader(topic, partition, node_id))

    def move_coordinator(self, group_id: str, node_id: int) -> None:
        """Group `group_id` is coordinated by `node_id` from now on; the old coordinator
        answers NOT_COORDINATOR until clients look it up again."""
        self._on_loop(lambda: self.state.move_coordinator(group_id, node_id))

    def add_partitions(self, topic: str, total: int) -> None:
        """Grow `topic` to `total` partitions (clients see them at their next Metadata)."""
        self._on_loop(lambda: self.state.topics.add_partitions(topic, total))

    def set_latency(self, node_id: int, seconds: float) -> None:
        """Every answer of broker `node_id` leaves `seconds` late (0: at once)."""
        if seconds < 0:
            raise ValueError(f"latency must not be negative: {seconds}")
        self.node(node_id).latency = seconds

    def set_throttle(self, node_id: int, milliseconds: int) -> None:
        """Every answer of broker `node_id` reports this throttle time, which clients
        honour by waiting before their next request to it (0: none)."""
        if milliseconds < 0:
            raise ValueError(f"throttle time must not be negative: {milliseconds}")
        self.node(node_id).dispatcher.throttle_ms = milliseconds

    # --- inspection ---

    def record_requests(self, on: bool = True, *, to: str | os.PathLike[str] | None = None) -> None:
        """Keep (or stop keeping) every answered request and its answer, decoded, for
        `requests()`; `record_requests` in the settings turns it on from the start.
        With `to`, each is written to that file as a JSON line as it is answered (the
        file is started afresh) and none is kept; the file is closed by `stop()`."""
        self._close_record_file()
        max_bytes = self.config.record_requests_max_bytes
        write_line = None
        if on and to is not None:
            # Lines go out through the buffer as requests are answered: nothing is kept.
            self._record_file = open(to, "w", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
            write_line = self._record_file.write
        for node in self.nodes:
            dispatcher = node.dispatcher
            if not on:
                dispatcher.recording = None
            elif write_line is not None or dispatcher.recording is None:
                dispatcher.recording = Recording(max_bytes, write_line)

    def _close_record_file(self) -> None:
        if self._record_file is None:
            return
        self._record_file.close()
        self._record_file = None
        for node in self.nodes:
            recording = node.dispatcher.recording
            if recording is not None and recording.write_line is not None:
                self._recorded_lines += recording.written
                node.dispatcher.recording = None

    def recorded_lines(self) -> int:
        """Requests written to record files (`record_requests(to=...)`) so far."""
        return self._recorded_lines + sum(
            recording.written
            for node in self.nodes
            if (recording := node.dispatcher.recording) is not None
        )

    def requests(
        self,
        api: str | None = None,
        *,
        client_id: str | None = None,
        node_id: int | None = None,
    ) -> list[Recorded]:
        """The recorded requests (see `record_requests`), oldest first, those of one API
        ("JoinGroup"), client id or broker when asked."""
        found = [
            r
            for node in self.nodes
            if node.dispatcher.recording is not None
            for r in tuple(node.dispatcher.recording)
        ]
        return sorted(
            (
                r
                for r in found
                if (api is None or r.api == api)
                and (client_id is None or r.client_id == client_id)
                and (node_id is None or r.node_id == node_id)
            ),
            key=lambda r: r.at,
        )

    def timeline(
        self,
        title: str | None = None,
        *,
        started_ms: int | None = None,
        max_details: int | None = None,
    ) -> dict[str, Any]:
        """What happened so far, as one JSON-able dict (minibroker/timeline.py): built
        from the recorded requests and the cluster's state now, from `started_ms` (wall
        clock; the first recorded request when not given). Recording must be on
        (`record_requests`), and kept in memory rather than written to a file."""
        recordings = [node.dispatcher.recording for node in self.nodes]
        if not any(r is not None and r.write_line is None for r in recordings):
            raise RuntimeError(
                "the timeline is built from the recorded requests: turn recording on "
                "(Broker(record_requests=True) or record_requests()) without to="
            )
        dropped = sum(r.dropped for r in recordings if r is not None)
        faults = [
            {
                "at_ms": int(at * 1000),
                "rule": rule.describe(),
                "api": kafka_api_name(api_key),
                "client_id": client_id,
                "action": action,
            }
            for at, rule, api_key, client_id, action in tuple(self.state.faults.acted)
        ]
        # Imported when asked for: it is not needed to serve Kafka clients.
        from minibroker.timeline import MAX_DETAILS, build_timeline

        return build_timeline(
            self.requests(),
            snapshot=self._on_loop(self._timeline_snapshot),
            title=title or "minibroker",
            started_ms=started_ms,
            ended_ms=int(time.time() * 1000),
            max_details=MAX_DETAILS if max_details is None else max_details,
            dropped=dropped,
            faults=faults,
            connections=[
                seen.as_json()
                for recording in recordings
                if recording is not None
                for seen in tuple(recording.connections)
            ],
        )

    def _timeline_snapshot(self) -> dict[str, Any]:
        """The state a timeline ends with (build_timeline's `snapshot`); on the loop."""
        state = self.state
        topics = [t for t in state.topics if not t.internal]
        kinds = (
            ("classic", state.groups.groups),
            ("consumer", state.consumer_groups.groups),
            ("share", state.share_groups.groups),
        )
        groups: dict[str, dict[str, str]] = {}
        for kind, found in kinds:
            for group_id, group in found.items():
                value = group.state
                groups[group_id] = {"type": kind, "state": getattr(value, "value", str(value))}
        return {
            "topics": {
                t.name: {"topic_id": str(t.topic_id), "partitions": len(t.partitions)}
                for t in topics
            },
            "end_offsets": {
                t.name: {p.index: p.log.high_watermark for p in t.partitions} for t in topics
            },
            "committed": {
                group_id: [
                    [topic, partition, c.offset]
                    for (topic, partition), c in group.offsets.items()
                    if c is not None
                ]
                for group_id, group in state.groups.groups.items()
                if group.offsets
            },
            "groups": groups,
            "transactions": {
                tid: txn.state.value for tid, txn in state.transactions.transactions.items()
            },
        }

    def write_requests(self, path: str | os.PathLike[str]) -> int:
        """The recorded requests as JSON lines (one per request and its answer), to
        `path`; how many."""
        recorded = self.requests()
        with open(path, "w", encoding="utf-8") as out:
            for record in recorded:
                out.write(record.json_line() + "\n")
        return len(recorded)

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the offset group `group_id` committed."""

        def read() -> dict[tuple[str, int], int]:
            stored = self.state.groups.committed(group_id, None)
            return {key: c.offset for key, c in stored.items() if c is not None}

        return self._on_loop(read)

    def group_assignments(self, group_id: str) -> dict[str, dict[str, list[int]]]:
        """Member id -> topic -> partitions the group's leader assigned it (consumer
        groups; a member of another protocol type shows an empty assignment)."""
        return {
            member: parse_assignment(data) for member, data in self.group_members(group_id).items()
        }

    # --- administration, callable from any thread ---

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
        def delete() -> None:
            self.state.topics.delete(name)
            self.state.groups.remove_topic(name)

        self._on_loop(delete)

    def topics(self) -> list[str]:
        return self._on_loop(self.state.topics.names)

    def end_offsets(self, topic: str) -> dict[int, int]:
        def read() -> dict[int, int]:
            found = self.state.topics.get(topic)
            if found is None:
                return {}
            return {p.index: p.log.high_watermark for p in found.partitions}

        return self._on_loop(read)

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition -> node id of its leader."""

        def read() -> dict[int, int]:
            found = self.state.topics.get(topic)
            return {p.index: p.leader for p in found.partitions} if found else {}

        return self._on_loop(read)

    def replicas(self, topic: str) -> dict[int, tuple[list[int], list[int]]]:
        """Partition -> (its replicas, preferred leader first; those in sync)."""

        def read() -> dict[int, tuple[list[int], list[int]]]:
            found = self.state.topics.get(topic)
            return (
                {p.index: (list(p.replicas), list(p.isr)) for p in found.partitions}
                if found
                else {}
            )

        return self._on_loop(read)

    def group_states(self) -> dict[str, str]:
        """Group id -> state name (classic: Empty, PreparingRebalance, ...; Kafka 4's
        consumer protocol: Empty, Assigning, Reconciling, Stable; share groups: Empty,
        Stable)."""

        def read() -> dict[str, str]:
            states = {g.group_id: g.state.value for g in self.state.groups.groups.values()}
            states.update(
                {g.group_id: g.state.value for g in self.state.consumer_groups.groups.values()}
            )
            states.update({g.group_id: g.state for g in self.state.share_groups.groups.values()})
            return states

        return self._on_loop(read)

    def group_types(self) -> dict[str, str]:
        """Group id -> "classic", "consumer" (Kafka 4's consumer protocol) or "share"."""

        def read() -> dict[str, str]:
            types = dict.fromkeys(self.state.groups.groups, "classic")
            types.update(dict.fromkeys(self.state.consumer_groups.groups, "consumer"))
            types.update(dict.fromkeys(self.state.share_groups.groups, "share"))
            return types

        return self._on_loop(read)

    def share_group_state(self, group_id: str) -> ShareGroupView | None:
        """Share group `group_id` now (None if there is none): its state and epochs, each
        member's partitions, and per partition its readers, share-partition start offset,
        records in flight, lag and records archived past the delivery count limit."""
        state = self.state

        def topic_name(topic_id: uuid.UUID) -> str | None:
            topic = state.topics.by_id(topic_id)
            return None if topic is None else topic.name

        def read() -> ShareGroupView | None:
            view = share_group_view(state.share_groups, state.share_partitions, topic_name)
            return view(group_id)

        return self._on_loop(read)

    def transaction_states(self) -> dict[str, str]:
        """Transactional id -> state name (Empty, Ongoing, CompleteCommit, ...)."""
        return self._on_loop(
            lambda: {
                tid: txn.state.value for tid, txn in self.state.transactions.transactions.items()
            }
        )

    def last_stable_offsets(self, topic: str) -> dict[int, int]:
        """Partition -> last stable offset (what read_committed consumers read up to)."""

        def read() -> dict[int, int]:
            found = self.state.topics.get(topic)
            return {p.index: p.log.last_stable_offset for p in found.partitions} if found else {}

        return self._on_loop(read)

    def group_members(self, group_id: str) -> dict[str, bytes]:
        """Member id -> current assignment bytes (a ConsumerProtocolAssignment), for a
        group; for a consumer-protocol group, the partitions the broker assigned."""

        def read() -> dict[str, bytes]:
            consumer_groups = self.state.consumer_groups
            consumer_group = consumer_groups.groups.get(group_id)
            if consumer_group is not None:
                return {
                    m.member_id: encode_assignment(consumer_groups.named(m.assigned))
                    for m in consumer_group.members.values()
                }
            group = self.state.groups.groups.get(group_id)
            return {m.member_id: m.assignment for m in group.members.values()} if group else {}

        return self._on_loop(read)

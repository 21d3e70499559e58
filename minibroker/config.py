"""Broker settings. Names mirror Kafka's broker configs where one exists."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from minibroker.protocol import oauthbearer, sasl
from minibroker.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from minibroker.protocol.kafka_releases import RELEASES

DEFAULT_MESSAGE_MAX_BYTES = 1_048_588  # Kafka's message.max.bytes
LOG_FLUSH_POLICIES = ("write", "interval", "os")
# OAUTHBEARER is served but not enabled by default: unsecured tokens prove nothing.
SUPPORTED_MECHANISMS = (*sasl.MECHANISMS, oauthbearer.OAUTHBEARER)


# Listeners' security protocols (Kafka's SecurityProtocol).
PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    security_protocol: str
    host: str
    port: int

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in (SASL_PLAINTEXT, SASL_SSL)

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in (SSL, SASL_SSL)


def _setting(default: Any, help: str) -> Any:
    """A field with the help text the command line shows for it."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Broker settings. Each is a keyword of `Broker(...)` / `Cluster(...)` and a flag of
    the command line (`--max-connections 100`)."""

    host: str = _setting("127.0.0.1", "address to listen on")
    port: int = _setting(0, "port of the first node (0 picks a free one)")
    advertised_host: str | None = _setting(
        None, "host name clients are told to connect to (default: the listening address)"
    )
    cluster_id: str = _setting("minibroker-cluster", "cluster id reported to clients")
    auto_create_topics: bool = _setting(
        True, "create unknown topics on Metadata requests (auto.create.topics.enable)"
    )
    num_partitions: int = _setting(
        1, "partitions of auto-created topics and of requests asking for -1 (num.partitions)"
    )
    message_max_bytes: int = _setting(
        DEFAULT_MESSAGE_MAX_BYTES, "default max.message.bytes of new topics (message.max.bytes)"
    )
    max_frame_bytes: int = _setting(
        DEFAULT_MAX_FRAME_BYTES,
        "a request frame declaring more bytes closes its connection (socket.request.max.bytes)",
    )
    max_connections: int = _setting(
        1024, "connections per node; further ones are closed when accepted (max.connections)"
    )
    max_connection_creation_rate: int = _setting(
        100,
        "new connections per second one client address may open to a node, after a burst "
        "of ten seconds' worth; further ones are closed as soon as they are accepted "
        "(0: no limit). Kafka's per-IP connection_creation_rate quota",
    )
    queued_max_request_bytes: int = _setting(
        256 * 1024 * 1024,
        "bytes a node holds in partial frames and unanswered requests; above it, "
        "connections in mid-frame stop reading until memory frees (queued.max.request.bytes)",
    )
    connections_max_idle_ms: int = _setting(
        600_000,
        "a connection with no request and no bytes for this long is closed "
        "(connections.max.idle.ms)",
    )
    partial_request_timeout_ms: int = _setting(
        30_000, "a frame still incomplete this long after its first byte closes its connection"
    )
    fetch_max_bytes: int = _setting(
        57_671_680, "the most one Fetch response carries, whatever it asks for (fetch.max.bytes)"
    )
    max_partitions_per_broker: int = _setting(
        100_000, "partitions the cluster may hold per node; more gets POLICY_VIOLATION"
    )
    max_partitions_per_request: int = _setting(
        1_000, "partitions one request may create; the rest get POLICY_VIOLATION"
    )
    max_decompressed_batch_bytes: int = _setting(
        64 * 1024 * 1024,
        "what one compressed batch may expand to when the broker reads inside it",
    )
    offsets_topic_partitions: int = _setting(
        50, "partitions of __consumer_offsets (offsets.topic.num.partitions)"
    )
    offsets_retention_minutes: float = _setting(
        10_080,
        "an empty group and its offsets are removed after this long (offsets.retention.minutes)",
    )
    group_initial_rebalance_delay_ms: int = _setting(
        0, "wait for more members before the first rebalance (Kafka: 3000)"
    )
    group_min_session_timeout_ms: int = _setting(
        100, "smallest session timeout a member may ask for (Kafka: 6000)"
    )
    group_max_session_timeout_ms: int = _setting(
        1_800_000, "largest session timeout a member may ask for"
    )
    group_consumer_session_timeout_ms: int = _setting(
        45_000,
        "session timeout of consumer-protocol group members (group.consumer.session.timeout.ms)",
    )
    group_consumer_heartbeat_interval_ms: int = _setting(
        500,
        "how often consumer-protocol group members heartbeat, so how soon they learn of a "
        "new assignment (Kafka: 5000; group.consumer.heartbeat.interval.ms)",
    )
    group_consumer_assignors: str = _setting(
        "uniform,range",
        "server-side assignors of consumer-protocol groups, the first the default "
        "(group.consumer.assignors)",
    )
    group_share_session_timeout_ms: int = _setting(
        45_000,
        "session timeout of share group members, unless the group's share.session.timeout.ms "
        "says otherwise (group.share.session.timeout.ms)",
    )
    group_share_heartbeat_interval_ms: int = _setting(
        5_000,
        "how often share group members heartbeat, unless the group's "
        "share.heartbeat.interval.ms says otherwise (group.share.heartbeat.interval.ms)",
    )
    group_share_min_session_timeout_ms: int = _setting(
        45_000,
        "least share.session.timeout.ms a share group may set (group.share.min.session.timeout.ms)",
    )
    group_share_max_session_timeout_ms: int = _setting(
        60_000,
        "most share.session.timeout.ms a share group may set (group.share.max.session.timeout.ms)",
    )
    group_share_min_heartbeat_interval_ms: int = _setting(
        5_000,
        "least share.heartbeat.interval.ms a share group may set "
        "(group.share.min.heartbeat.interval.ms)",
    )
    group_share_max_heartbeat_interval_ms: int = _setting(
        15_000,
        "most share.heartbeat.interval.ms a share group may set "
        "(group.share.max.heartbeat.interval.ms)",
    )
    group_share_max_size: int = _setting(
        200, "members one share group may have (group.share.max.size)"
    )
    group_share_record_lock_duration_ms: int = _setting(
        30_000,
        "how long a share consumer holds a record it fetched before it goes back to the "
        "others, unless the group's share.record.lock.duration.ms says otherwise "
        "(group.share.record.lock.duration.ms)",
    )
    group_share_min_record_lock_duration_ms: int = _setting(
        15_000,
        "least share.record.lock.duration.ms a share group may set "
        "(group.share.min.record.lock.duration.ms)",
    )
    group_share_max_record_lock_duration_ms: int = _setting(
        60_000,
        "most share.record.lock.duration.ms a share group may set "
        "(group.share.max.record.lock.duration.ms)",
    )
    group_share_delivery_count_limit: int = _setting(
        5,
        "deliveries of a record to a share group before it is archived, unless the group's "
        "share.delivery.count.limit says otherwise (group.share.delivery.count.limit)",
    )
    group_share_min_delivery_count_limit: int = _setting(
        2,
        "least share.delivery.count.limit a share group may set "
        "(group.share.min.delivery.count.limit)",
    )
    group_share_max_delivery_count_limit: int = _setting(
        10,
        "most share.delivery.count.limit a share group may set "
        "(group.share.max.delivery.count.limit)",
    )
    group_share_partition_max_record_locks: int = _setting(
        2_000,
        "records of one partition a share group may have in flight, unless the group's "
        "share.partition.max.record.locks says otherwise "
        "(group.share.partition.max.record.locks)",
    )
    group_share_min_partition_max_record_locks: int = _setting(
        100,
        "least share.partition.max.record.locks a share group may set "
        "(group.share.min.partition.max.record.locks)",
    )
    group_share_max_partition_max_record_locks: int = _setting(
        4_000,
        "most share.partition.max.record.locks a share group may set "
        "(group.share.max.partition.max.record.locks)",
    )
    group_share_max_share_sessions: int = _setting(
        2_000, "share sessions (ShareFetch) one broker keeps (group.share.max.share.sessions)"
    )
    transaction_max_timeout_ms: int = _setting(
        900_000,
        "largest transaction.timeout.ms a transactional producer may ask for "
        "(transaction.max.timeout.ms)",
    )
    transactional_id_expiration_ms: int = _setting(
        604_800_000,
        "a transactional id with nothing open is forgotten after this long idle "
        "(transactional.id.expiration.ms)",
    )

    listeners: str | None = _setting(
        None,
        "listeners as NAME://HOST:PORT, comma-separated (NAME is PLAINTEXT, SSL, "
        "SASL_PLAINTEXT or SASL_SSL, or any name mapped by listener_security_protocol_map; "
        "port 0 picks a free one). Default: PLAINTEXT on host:port (listeners)",
    )
    advertised_listeners: str | None = _setting(
        None,
        "NAME://HOST:PORT per listener: the address clients are told for it (port 0: the "
        "one listened on). Default: advertised_host, or the listening address "
        "(advertised.listeners)",
    )
    listener_security_protocol_map: str | None = _setting(
        None,
        "NAME:PROTOCOL pairs, comma-separated, for listeners not named after their security "
        "protocol (listener.security.protocol.map)",
    )
    ssl_certfile: str | None = _setting(
        None, "PEM file of the certificate (and chain) SSL and SASL_SSL listeners present"
    )
    ssl_keyfile: str | None = _setting(None, "PEM file of that certificate's private key")
    ssl_cafile: str | None = _setting(
        None, "PEM file of the CAs client certificates are checked against"
    )
    ssl_client_auth: str = _setting(
        "none",
        "client certificates on SSL listeners: none, requested or required; a client's "
        "principal is User:<its certificate's subject> (ssl.client.auth)",
    )
    sasl_enabled_mechanisms: str = _setting(
        ",".join(sasl.MECHANISMS),
        "SASL mechanisms SASL listeners accept, comma-separated (sasl.enabled.mechanisms)",
    )
    sasl_users_file: str | None = _setting(
        None, 'TOML file with a [users] table of name = "password": who may sign in over SASL'
    )
    sasl_users: Mapping[str, str] | None = field(
        default=None,
        metadata={"help": "users who may sign in over SASL: name -> password", "flag": False},
    )
    connections_max_reauth_ms: int = _setting(
        0,
        "a SASL session lasts this long; the client re-authenticates within it or its "
        "connection closes (0: for ever) (connections.max.reauth.ms)",
    )
    sasl_oauthbearer_principal_claim: str = _setting(
        "sub",
        "the claim of an OAUTHBEARER token naming its principal "
        "(unsecuredValidatorPrincipalClaimName)",
    )
    sasl_oauthbearer_required_scope: str | None = _setting(
        None,
        "scopes, space-separated, every OAUTHBEARER token's scope claim must hold "
        "(unsecuredValidatorRequiredScope)",
    )
    sasl_oauthbearer_validator: Callable[[str], str | None] | None = field(
        default=None,
        metadata={
            "help": "checks OAUTHBEARER tokens instead of the unsecured validator: token "
            "-> principal name, or None to refuse it (sasl.server.callback.handler.class)",
            "flag": False,
        },
    )

    schema_registry: bool = _setting(
        False,
        "serve a Confluent-compatible Schema Registry over HTTP beside the broker "
        "(its schemas kept in the _schemas topic)",
    )
    schema_registry_port: int = _setting(
        -1, "port of the Schema Registry (0 picks a free one; -1: none unless schema_registry)"
    )
    schema_registry_max_body_bytes: int = _setting(
        16 * 1024 * 1024, "a Schema Registry request body over this many bytes gets 413"
    )
    console_port: int = _setting(
        -1, "port of the web console on the broker's host (0 picks a free one; -1: none)"
    )
    console_allow_changes: bool = _setting(
        False,
        "the web console may change the broker (create and delete topics, produce, fault "
        "rules); without it, its writes get 403",
    )

    log_retention_check_interval_ms: int = _setting(
        300_000,
        "how often topics give up what retention.ms and retention.bytes no longer keep "
        "(log.retention.check.interval.ms); also whenever the broker's clock is advanced",
    )
    log_cleaner_backoff_ms: int = _setting(
        15_000,
        "how often compacted topics drop the records a later one of the same key replaces "
        "(log.cleaner.backoff.ms); also whenever the broker's clock is advanced",
    )
    connection_failed_authentication_delay_ms: int = _setting(
        100,
        "a connection refused sign-in is closed this long after the answer saying why, so "
        "the client reads the answer first (connection.failed.authentication.delay.ms)",
    )
    acls_enabled: bool = _setting(
        False,
        "enforce ACLs on every request (Kafka: an authorizer.class.name); off, every client "
        "may do everything and the ACL APIs answer SECURITY_DISABLED",
    )
    super_users: str | None = _setting(
        None,
        "principals ACLs never refuse, semicolon-separated: User:admin;User:CN=ops (super.users)",
    )
    allow_everyone_if_no_acl_found: bool = _setting(
        False,
        "with ACLs on, a resource no ACL names is open to everyone "
        "(allow.everyone.if.no.acl.found)",
    )
    max_acls: int = _setting(
        1_000_000, "ACLs the cluster may hold; further creations get POLICY_VIOLATION"
    )
    max_acls_per_request: int = _setting(
        1_000, "ACLs one CreateAcls request may create; the rest get POLICY_VIOLATION"
    )

    data_dir: str | None = _setting(
        None,
        "keep topics, records, committed offsets and producer state in this directory "
        "across restarts (log.dirs); default: in memory",
    )
    log_flush: str = _setting(
        "os",
        "with data_dir, when written data is fsynced: write (before each answer), interval "
        "(every log_flush_interval_ms) or os (left to the operating system; a crash of the "
        "broker loses nothing, one of the machine may)",
    )
    log_flush_interval_ms: int = _setting(
        1000, "how often log_flush=interval fsyncs what was written (log.flush.interval.ms)"
    )
    max_open_segment_files: int = _setting(
        0,
        "with data_dir, segment files kept open at once; past it the least recently used "
        "is closed and reopened when needed. 0: half of the open-files limit (ulimit -n) "
        "left after 64 for the broker's own files",
    )

    record_requests: bool = _setting(
        False,
        "keep every answered request and its answer, decoded, for broker.requests(...) "
        "(the newest, within record_requests_max_bytes and 100,000 per node)",
    )
    record_requests_max_bytes: int = _setting(
        64 * 1024 * 1024,
        "bytes the recorded requests and answers may take per node, estimated (oldest "
        "dropped first); bytes fields over 64 KiB are kept as their first 64 KiB",
    )
    kafka_version: str | None = _setting(
        None,
        "serve only the API versions this Kafka release's brokers served: "
        f"{', '.join(RELEASES)} (default: every version minibroker serves)",
    )

    def __post_init__(self) -> None:
        if self.kafka_version is not None and self.kafka_version not in RELEASES:
            raise ValueError(
                f"kafka_version={self.kafka_version!r}: must be one of {', '.join(RELEASES)}"
            )
        for name, least in LEAST_VALUES.items():
            value = getattr(self, name)
            if value < least:
                raise ValueError(f"{name}={value!r}: must be at least {least}")
        if self.port > 65535:
            raise ValueError(f"port={self.port!r}: must be at most 65535")
        if self.log_flush not in LOG_FLUSH_POLICIES:
            raise ValueError(
                f"log_flush={self.log_flush!r}: must be one of {', '.join(LOG_FLUSH_POLICIES)}"
            )
        if self.ssl_client_auth not in SSL_CLIENT_AUTH:
            raise ValueError(
                f"ssl_client_auth={self.ssl_client_auth!r}: must be one of "
                f"{', '.join(SSL_CLIENT_AUTH)}"
            )
        for mechanism in self.mechanisms():
            if mechanism not in SUPPORTED_MECHANISMS:
                raise ValueError(
                    f"sasl_enabled_mechanisms={self.sasl_enabled_mechanisms!r}: {mechanism} "
                    f"is not one of {', '.join(SUPPORTED_MECHANISMS)}"
                )
        if not self.sasl_oauthbearer_principal_claim.strip():
            raise ValueError("sasl_oauthbearer_principal_claim='': must name a claim")
        listeners = self.listener_list()
        self.advertised_addresses()
        if self.ssl_client_auth != "none" and not self.ssl_cafile:
            raise ValueError(
                f"ssl_client_auth={self.ssl_client_auth!r} needs ssl_cafile (the CAs client "
                "certificates are checked against)"
            )
        if any(listener.uses_tls for listener in listeners) and not (
            self.ssl_certfile and self.ssl_keyfile
        ):
            raise ValueError("an SSL or SASL_SSL listener needs ssl_certfile and ssl_keyfile")
        if self.group_max_session_timeout_ms < self.group_min_session_timeout_ms:
            raise ValueError(
                f"group_max_session_timeout_ms={self.group_max_session_timeout_ms!r}: must be "
                f"at least group_min_session_timeout_ms ({self.group_min_session_timeout_ms})"
            )

        for name in SHARE_BOUNDED:
            value = getattr(self, f"group_share_{name}")
            least = getattr(self, f"group_share_min_{name}")
            most = getattr(self, f"group_share_max_{name}")
            if not least <= value <= most:
                raise ValueError(
                    f"group_share_{name}={value!r}: must be between group_share_min_{name} "
                    f"({least}) and group_share_max_{name} ({most})"
                )
        if self.group_share_heartbeat_interval_ms >= self.group_share_session_timeout_ms:
            raise ValueError(
                f"group_share_heartbeat_interval_ms={self.group_share_heartbeat_interval_ms!r}: "
                "must be less than group_share_session_timeout_ms "
                f"({self.group_share_session_timeout_ms})"
            )

        assignors = [a.strip() for a in self.group_consumer_assignors.split(",") if a.strip()]
        unknown = [a for a in assignors if a not in ("uniform", "range")]
        if not assignors or unknown:
            raise ValueError(
                f"group_consumer_assignors={self.group_consumer_assignors!r}: a comma-separated "
                "list of uniform and range"
            )

    def share_settings(self) -> list[tuple[str, int]]:
        """The group.share.* settings: (name after "group.share.", value)."""
        return [
            (f.name.removeprefix("group_share_").replace("_", "."), getattr(self, f.name))
            for f in fields(self)
            if f.name.startswith("group_share_")
        ]

    @property
    def serves_schema_registry(self) -> bool:
        return self.schema_registry or self.schema_registry_port >= 0

    def super_user_list(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in (self.super_users or "").split(";") if p.strip())

    def mechanisms(self) -> tuple[str, ...]:
        return tuple(m.strip() for m in self.sasl_enabled_mechanisms.split(",") if m.strip())

    def listener_list(self) -> list[Listener]:
        """The listeners, first one first: `listeners`, or PLAINTEXT on host:port."""
        if self.listeners is None:
            return [Listener(PLAINTEXT, PLAINTEXT, self.host, self.port)]
        protocols = _protocol_map(self.listener_security_protocol_map)
        found = []
        for name, host, port in _addresses("listeners", self.listeners):
            protocol = protocols.get(name, name)
            if protocol not in SECURITY_PROTOCOLS:
                raise ValueError(
                    f"listeners={self.listeners!r}: {name} is not a security protocol; map it "
                    "to one with listener_security_protocol_map (e.g. INTERNAL:SASL_SSL)"
                )
            found.append(Listener(name, protocol, host, port))
        if not found:
            raise ValueError("listeners='': at least one listener is needed")
        return found

    def advertised_addresses(self) -> dict[str, tuple[str, int]]:
        """listener name -> (host, port) advertised (port 0: the one listened on)."""
        names = {listener.name for listener in self.listener_list()}
        if self.advertised_listeners is None:
            return {}
        found = {}
        for name, host, port in _addresses("advertised_listeners", self.advertised_listeners):
            if name not in names:
                raise ValueError(
                    f"advertised_listeners={self.advertised_listeners!r}: {name} is not a "
                    f"listener ({', '.join(sorted(names))})"
                )
            found[name] = (host, port)
        return found

    def broker_configs(self) -> dict[str, str]:
        """What DescribeConfigs reports for the broker: the values in force."""
        return {
            "auto.create.topics.enable": str(self.auto_create_topics).lower(),
            "num.partitions": str(self.num_partitions),
            "message.max.bytes": str(self.message_max_bytes),
            "socket.request.max.bytes": str(self.max_frame_bytes),
            "max.connections": str(self.max_connections),
            "offsets.topic.num.partitions": str(self.offsets_topic_partitions),
            "offsets.retention.minutes": str(self.offsets_retention_minutes),
            "queued.max.request.bytes": str(self.queued_max_request_bytes),
            "connections.max.idle.ms": str(self.connections_max_idle_ms),
            "fetch.max.bytes": str(self.fetch_max_bytes),
            "group.initial.rebalance.delay.ms": str(self.group_initial_rebalance_delay_ms),
            "group.min.session.timeout.ms": str(self.group_min_session_timeout_ms),
            "group.max.session.timeout.ms": str(self.group_max_session_timeout_ms),
            "group.consumer.session.timeout.ms": str(self.group_consumer_session_timeout_ms),
            "group.consumer.heartbeat.interval.ms": str(self.group_consumer_heartbeat_interval_ms),
            "group.consumer.assignors": self.group_consumer_assignors,
            **{f"group.share.{name}": str(value) for name, value in self.share_settings()},
            "transaction.max.timeout.ms": str(self.transaction_max_timeout_ms),
            "transactional.id.expiration.ms": str(self.transactional_id_expiration_ms),
            "default.replication.factor": "1",
            "log.message.timestamp.type": "CreateTime",
            "log.retention.check.interval.ms": str(self.log_retention_check_interval_ms),
            "log.cleaner.backoff.ms": str(self.log_cleaner_backoff_ms),
        }


SSL_CLIENT_AUTH = ("none", "requested", "required")
# The group.share.* settings with a least and a most value (group_share_min_X,
# group_share_max_X) that share groups' configs must stay within, as Kafka's.
SHARE_BOUNDED = (
    "session_timeout_ms",
    "heartbeat_interval_ms",
    "record_lock_duration_ms",
    "delivery_count_limit",
    "partition_max_record_locks",
)


def _addresses(setting: str, text: str) -> list[tuple[str, str, int]]:
    """(NAME, HOST, PORT) of each NAME://HOST:PORT in a comma-separated list."""
    found = []
    names = set()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, colon, port_text = address.rpartition(":")
        host = host.strip("[]")
        if not sep or not name or not colon or not port_text.isdigit() or int(port_text) > 65535:
            raise ValueError(f"{setting}={text!r}: {item!r} is not NAME://HOST:PORT")
        if name in names:
            raise ValueError(f"{setting}={text!r}: {name} is named twice")
        names.add(name)
        found.append((name.upper(), host, int(port_text)))
    return found


def _protocol_map(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    found = {}
    for item in (part.strip() for part in text.split(",")):
        name, colon, protocol = item.partition(":")
        if not colon or protocol.upper() not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"listener_security_protocol_map={text!r}: {item!r} is not NAME:PROTOCOL "
                f"(PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        found[name.upper()] = protocol.upper()
    return found


# The least value of each numeric setting (Kafka's where it has one: fetch.max.bytes is
# at least 1024); below it the broker could not work as its setting says.
LEAST_VALUES: Mapping[str, float] = {
    "port": 0,
    "num_partitions": 1,
    "message_max_bytes": 1,
    "max_frame_bytes": 1,
    "max_connections": 0,
    "max_connection_creation_rate": 0,
    "queued_max_request_bytes": 1,
    "connections_max_idle_ms": 1,
    "partial_request_timeout_ms": 1,
    "fetch_max_bytes": 1024,
    "record_requests_max_bytes": 0,
    "max_partitions_per_broker": 1,
    "max_partitions_per_request": 1,
    "max_acls": 0,
    "max_acls_per_request": 0,
    "max_decompressed_batch_bytes": 1,
    "offsets_topic_partitions": 1,
    "offsets_retention_minutes": 0,
    "group_initial_rebalance_delay_ms": 0,
    "group_min_session_timeout_ms": 0,
    "group_max_session_timeout_ms": 0,
    "group_consumer_session_timeout_ms": 1,
    "group_consumer_heartbeat_interval_ms": 1,
    **{
        f"group_share_{kind}{name}": 1
        for name in (
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "record_lock_duration_ms",
            "delivery_count_limit",
            "partition_max_record_locks",
        )
        for kind in ("", "min_", "max_")
    },
    "group_share_max_size": 1,
    "group_share_max_share_sessions": 1,
    "transaction_max_timeout_ms": 1,
    "transactional_id_expiration_ms": 1,
    "connections_max_reauth_ms": 0,
    "connection_failed_authentication_delay_ms": 0,
    "log_retention_check_interval_ms": 1,
    "log_flush_interval_ms": 1,
    "max_open_segment_files": 0,
    "log_cleaner_backoff_ms": 1,
    "schema_registry_port": -1,
    "schema_registry_max_body_bytes": 1,
    "console_port": -1,
}


def settings_from_text(pairs: Mapping[str, str]) -> dict[str, Any]:
    """Settings given as text (ini files): each value parsed as its field's type.

    Raises ValueError naming the setting, and the nearest real name for a typo.
    """
    return check_settings({name: _parse(name, text) for name, text in pairs.items()})


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` if every name is a BrokerConfig field; else ValueError saying which is not."""
    known = {f.name for f in fields(BrokerConfig)}
    for name in settings:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ValueError(f"{name!r} is not a broker setting{hint}")
    return dict(settings)


def _parse(name: str, text: str) -> Any:
    check_settings({name: None})
    kind = str(next(f.type for f in fields(BrokerConfig) if f.name == name))
    value = text.strip()
    try:
        if kind == "bool":
            lowered = value.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise ValueError("expected true or false")
            return lowered in ("true", "1", "yes", "on")
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
    except ValueError as exc:
        raise ValueError(f"{name}={text!r}: {exc}") from None
    return None if kind.endswith("| None") and value == "" else value

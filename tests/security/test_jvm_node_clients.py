"""SASL and TLS listeners with Kafka's Java client (kafka-clients 3.9 and 4.x) and kafkajs.

One list of scenarios, run by a thin driver per client: tests/security/jvm/
SecurityScenarios.java (compiled against each client line's jars) and
tests/security/node/security.js (kafkajs from npm). Each driver runs every scenario in one
process against the same brokers and prints one JSON result a scenario; each scenario is
one test here, holding that result to what Kafka gives the client:

- signed in with the right password (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 on
  SASL_PLAINTEXT, SCRAM-SHA-512 on SASL_SSL), and over SSL trusting the CA, the client
  produces records with acks=all and reads them back from the earliest offset;
- a wrong password or an unknown user is refused with SASL_AUTHENTICATION_FAILED, the
  client's SASL authentication error carrying the broker's message;
- a client speaking plaintext to the SSL listener does not get in, and gives up within
  its own bounds;
- (Java) on a broker requiring client certificates, a client presenting one gets in and
  one without does not: it fails with SslAuthenticationException, as the broker's TLS
  alert makes it (Kafka's);
- on a broker enforcing ACLs (a broker of its own for each client, so that each sees only
  the ACLs it made), one story in steps, run in order: the super user creates alice's
  grants through the client's admin API and reads back exactly those; alice produces and
  consumes in her group, committing; bob, with no grant, is refused with Kafka's
  authorization errors as a producer, as a consumer (on the topic, whose metadata he may
  not see) and when he asks for the group's offsets (on the group); the super user
  deletes alice's WRITE (exactly that one ACL), and alice's next send is refused, as is
  (Java) a new idempotent producer of hers, which can no longer get a producer id.

Without Java and the fetched jars, or without Node and npm, the tests skip and say why.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from minibroker import Broker
from minibroker.state.acl import AclFilter
from minibroker.testing.tls import TlsFiles
from tests.interop.conftest import stored_batch_headers
from tests.interop.test_client_matrix import Built, Driver

HERE = Path(__file__).parent
LISTENERS = (
    "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
)
USER, PASSWORD = "alice", "alice-secret"
RECORDS = 10
# One driver run, every scenario in it; each scenario has a bound of its own inside
# (40 s), and a refused client's calls give up after 8 s.
RUN_TIMEOUT = 150

# The ACL story: the users of its broker, whose super user is admin.
ACL_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
ACL_TOPIC, ACL_GROUP, ACL_PREFIX = "acl-orders", "acl-orders-readers", "shared-"
Acl = tuple[str, str, str, str, str, str, str]  # type, name, pattern, principal, host, op, perm
ALICE_WRITES: Acl = ("TOPIC", ACL_TOPIC, "LITERAL", "User:alice", "*", "WRITE", "ALLOW")
GRANTS: tuple[Acl, ...] = (
    ALICE_WRITES,
    ("TOPIC", ACL_TOPIC, "LITERAL", "User:alice", "*", "READ", "ALLOW"),
    ("GROUP", ACL_GROUP, "LITERAL", "User:alice", "*", "READ", "ALLOW"),
    ("TOPIC", ACL_PREFIX, "PREFIXED", "User:alice", "*", "DESCRIBE", "ALLOW"),
)

# What Kafka answers a failed sign-in (SaslAuthenticate's error message).
PLAIN_FAILED = "Authentication failed: Invalid username or password"


def scram_failed(mechanism: str) -> str:
    return (
        "Authentication failed during authentication due to invalid credentials "
        f"with SASL mechanism {mechanism}"
    )


Data = dict[str, Any]


# --- the scenarios ----------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    """How a client that must not get in fails: Java's exception class, the names of the
    kafkajs error and of those it wraps (outermost first), and the text both carry."""

    java: str
    kafkajs: tuple[str, ...] = ()
    message: str | None = None


ERRORS = "org.apache.kafka.common.errors"


def sasl_refusal(message: str) -> Refusal:
    return Refusal(
        f"{ERRORS}.SaslAuthenticationException", ("KafkaJSSASLAuthenticationError",), message
    )


# Kafka's SSL listener closes a connection that does not open with a TLS handshake. Java
# keeps reconnecting until its call's time runs out; kafkajs retries, then gives up.
PLAINTEXT_ON_TLS = Refusal(
    f"{ERRORS}.TimeoutException",
    ("KafkaJSNumberOfRetriesExceeded", "KafkaJSConnectionClosedError"),
)
# Kafka's broker rejects the handshake with a TLS alert (bad_certificate); under TLS 1.3
# Java reads it after its side of the handshake ("Failed to process post-handshake
# messages") and fails the call at once: an authentication failure is not retried.
NO_CLIENT_CERTIFICATE = Refusal(f"{ERRORS}.SslAuthenticationException")


@dataclass(frozen=True)
class Scenario:
    name: str
    listener: str  # the broker listener the client dials
    protocol: str  # the client's security.protocol
    mechanism: str | None = None
    username: str = USER
    password: str = PASSWORD
    certificate: bool = False  # the client presents the client certificate
    broker: str = "requested"  # client certificates "requested" or "required"
    refusal: Refusal | None = None  # None: the records go through
    clients: tuple[str, ...] = ("java", "kafkajs")
    # What Kafka does here that the broker does not yet: the refusal's error check is a
    # strict xfail (that the client did not get in is checked all the same).
    missing: str | None = None
    # A step of the ACL story (its driver kind): the steps run in order, on the ACL broker.
    acl_step: str | None = None

    @property
    def kind(self) -> str:
        if self.acl_step is not None:
            return self.acl_step
        return "refused" if self.refusal else "round_trip"


def acl_scenario(name: str, step: str) -> Scenario:
    return Scenario(
        name, "SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-256", broker="acl", acl_step=step
    )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("sasl_plaintext_plain", "SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAIN"),
    Scenario("sasl_plaintext_scram_sha_256", "SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-256"),
    Scenario("sasl_plaintext_scram_sha_512", "SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-512"),
    Scenario("sasl_ssl_scram_sha_512", "SASL_SSL", "SASL_SSL", "SCRAM-SHA-512"),
    Scenario(
        "wrong_password_plain",
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
        "PLAIN",
        password="not-alice-secret",
        refusal=sasl_refusal(PLAIN_FAILED),
    ),
    Scenario(
        "wrong_password_scram_sha_256",
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
        password="not-alice-secret",
        refusal=sasl_refusal(scram_failed("SCRAM-SHA-256")),
    ),
    Scenario(
        "wrong_password_sasl_ssl_scram_sha_512",
        "SASL_SSL",
        "SASL_SSL",
        "SCRAM-SHA-512",
        password="not-alice-secret",
        refusal=sasl_refusal(scram_failed("SCRAM-SHA-512")),
    ),
    Scenario(
        "unknown_user_plain",
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
        "PLAIN",
        username="mallory",
        refusal=sasl_refusal(PLAIN_FAILED),
    ),
    Scenario(
        "unknown_user_scram_sha_512",
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        username="mallory",
        refusal=sasl_refusal(scram_failed("SCRAM-SHA-512")),
    ),
    Scenario("plaintext_on_ssl_port", "SSL", "PLAINTEXT", refusal=PLAINTEXT_ON_TLS),
    Scenario("ssl_trusting_the_ca", "SSL", "SSL"),
    Scenario(
        "ssl_client_certificate",
        "SSL",
        "SSL",
        certificate=True,
        broker="required",
        clients=("java",),
    ),
    Scenario(
        "ssl_without_a_required_certificate",
        "SSL",
        "SSL",
        broker="required",
        refusal=NO_CLIENT_CERTIFICATE,
        clients=("java",),
    ),
    # The ACL story, in its order.
    acl_scenario("acl_admin_round_trip", "acl_admin"),
    acl_scenario("acl_allowed_principal_served", "acl_served"),
    acl_scenario("acl_principal_without_write_refused", "acl_produce_refused"),
    acl_scenario("acl_group_without_read_refused", "acl_consume_refused"),
    acl_scenario("acl_deleted_then_refused", "acl_deleted"),
)
ACL_STORY = tuple(s.name for s in SCENARIOS if s.acl_step is not None)


# --- the clients ------------------------------------------------------------------------


@dataclass(frozen=True)
class Client:
    name: str
    family: str  # "java" or "kafkajs": which scenarios it runs and how it fails
    driver: Driver  # built as the client matrix builds its drivers

    def settings(self, scenarios: list[Scenario], brokers: Brokers) -> tuple[str, str]:
        """The driver's settings file (suffix, text) for `scenarios`."""
        entries = [self.entry(scenario, brokers) for scenario in scenarios]
        if self.family == "kafkajs":
            return ".json", json.dumps({"scenarios": entries})
        lines = [f"scenarios={','.join(s.name for s in scenarios)}"]
        for entry in entries:
            name = entry.pop("name")
            lines += [f"{name}.{key}={_escaped(_property(value))}" for key, value in entry.items()]
        return ".properties", "\n".join(lines) + "\n"

    def entry(self, scenario: Scenario, brokers: Brokers) -> dict[str, Any]:
        broker = brokers.of(scenario, self)
        entry: dict[str, Any] = {
            "name": scenario.name,
            "kind": scenario.kind,
            "bootstrap": broker.bootstrap_servers_for(scenario.listener),
            "protocol": scenario.protocol,
        }
        if scenario.acl_step is not None:
            entry |= {
                "mechanism": scenario.mechanism,
                "topic": ACL_TOPIC,
                "group": ACL_GROUP,
                "count": RECORDS,
                "grants": [list(grant) for grant in GRANTS],
                "revoke": list(ALICE_WRITES),
            }
            for role, user in (("admin", "admin"), ("allowed", "alice"), ("refused", "bob")):
                entry |= {f"{role}_user": user, f"{role}_password": ACL_USERS[user]}
            return entry
        if scenario.refusal is None:
            entry |= {"topic": self.topic(scenario), "count": RECORDS}
        if scenario.mechanism is not None:
            entry |= {
                "mechanism": scenario.mechanism,
                "username": scenario.username,
                "password": scenario.password,
            }
        if scenario.protocol in ("SSL", "SASL_SSL"):
            entry["ca"] = str(brokers.tls.ca)
        if scenario.certificate:
            entry |= {
                "certificate": str(brokers.tls.client_certificate),
                "key": str(brokers.tls.client_key),
            }
        return entry

    def topic(self, scenario: Scenario) -> str:
        return f"security-{self.name}-{scenario.name}"


def _escaped(value: str) -> str:
    """A .properties value read back as written (paths, passwords)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _property(value: Any) -> str:
    """A setting as the Java driver reads it: an ACL's fields joined by `,`, a list of
    ACLs by `;`."""
    if isinstance(value, list):
        separator = ";" if value and isinstance(value[0], list) else ","
        return separator.join(_property(item) for item in value)
    return str(value)


CLIENTS = (
    *(
        Client(
            f"java-{line}",
            "java",
            Driver(
                f"security-java-{line}",
                "java",
                str(HERE / "jvm"),
                "SecurityScenarios",
                java_line=line,
            ),
        )
        for line in ("3.9", "4")
    ),
    Client(
        "kafkajs", "kafkajs", Driver("security-kafkajs", "node", str(HERE / "node"), "security.js")
    ),
)


# --- the brokers and the runs -------------------------------------------------------------


@dataclass
class Brokers:
    requested: Broker  # every listener; client certificates requested
    required: Broker  # SSL only; client certificates required
    acl: dict[str, Broker]  # client name -> its broker enforcing ACLs (SASL_PLAINTEXT)
    tls: TlsFiles

    def of(self, scenario: Scenario, client: Client) -> Broker:
        if scenario.broker == "acl":
            return self.acl[client.name]
        return self.required if scenario.broker == "required" else self.requested


@dataclass
class Run:
    """One driver run of the scenarios."""

    client: Client
    results: dict[str, Data] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    problem: str | None = None  # a crash or timeout of the whole run
    stderr: str = ""
    seconds: float = 0.0


def _text(output: str | bytes | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def _run(client: Client, built: Built, brokers: Brokers, names: list[str], work: Path) -> Run:
    run = Run(client)
    command = built.command(client.driver)  # skips when the client cannot be built here
    if set(names) & set(ACL_STORY):
        names = [*names, *ACL_STORY]  # a step of the story needs the steps before it
    scenarios = [s for s in SCENARIOS if s.name in names]
    suffix, text = client.settings(scenarios, brokers)
    settings = work / f"{client.name}{suffix}"
    settings.write_text(text)
    started = time.monotonic()
    try:
        done = subprocess.run(
            [*command, str(settings)], capture_output=True, text=True, timeout=RUN_TIMEOUT
        )
        stdout, run.stderr = done.stdout, done.stderr
        if done.returncode != 0:
            run.problem = f"the driver exited with status {done.returncode}"
    except subprocess.TimeoutExpired as exc:
        stdout, run.stderr = _text(exc.stdout), _text(exc.stderr)
        run.problem = f"the driver run did not finish within {RUN_TIMEOUT} s"
    run.seconds = time.monotonic() - started
    for line in stdout.splitlines():
        try:
            reported = json.loads(line)
        except ValueError:
            continue
        if not isinstance(reported, dict):
            continue
        if "start" in reported:
            run.started.append(reported["start"])
        elif "scenario" in reported:
            run.results[reported["scenario"]] = reported
    return run


def _selected(session: pytest.Session) -> dict[str, list[str]]:
    """client name -> the scenarios this session runs for it."""
    wanted: dict[str, list[str]] = {}
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if not isinstance(item, pytest.Function) or callspec is None:
            continue
        if item.module is None or item.module.__name__ != __name__:
            continue
        if "client_run" in callspec.params:
            names = wanted.setdefault(callspec.params["client_run"], [])
            names.append(callspec.params["scenario"].name)
    return wanted


@pytest.fixture(scope="module")
def _brokers(
    kafka_tls_files: TlsFiles,
) -> Iterator[Brokers]:
    with (
        Broker(
            listeners=LISTENERS,
            sasl_users={USER: PASSWORD},
            **kafka_tls_files.broker_settings(client_auth="requested"),
        ) as requested,
        Broker(
            listeners="SSL://127.0.0.1:0",
            **kafka_tls_files.broker_settings(client_auth="required"),
        ) as required,
        contextlib.ExitStack() as stack,
    ):
        acl: dict[str, Broker] = {}
        for client in CLIENTS:
            broker = stack.enter_context(
                Broker(
                    listeners="SASL_PLAINTEXT://127.0.0.1:0",
                    sasl_users=ACL_USERS,
                    acls_enabled=True,
                    super_users="User:admin",
                )
            )
            broker.create_topic(ACL_TOPIC, 1)
            acl[client.name] = broker
        yield Brokers(requested, required, acl, kafka_tls_files)


@pytest.fixture(scope="module")
def _launches(
    request: pytest.FixtureRequest,
    _brokers: Brokers,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Future[Run]]]:
    """Every client the session needs, built and run at once against the same brokers."""
    built = Built(tmp_path_factory)
    by_name = {client.name: client for client in CLIENTS}
    selected = _selected(request.session)
    with ThreadPoolExecutor(max_workers=max(1, len(selected))) as pool:
        yield {
            name: pool.submit(
                _run, by_name[name], built, _brokers, names, tmp_path_factory.mktemp(name)
            )
            for name, names in selected.items()
        }


@pytest.fixture(scope="module")
def client_run(request: pytest.FixtureRequest, _launches: dict[str, Future[Run]]) -> Run:
    name: str = request.param
    launch = _launches.get(name)
    if launch is None:
        pytest.fail(f"{name} was not launched for this session")
    run = launch.result()  # re-raises the build's skip
    print(f"{name}: the driver run took {run.seconds:.1f} s", file=sys.stderr)
    return run


# --- the checks ---------------------------------------------------------------------------


def check_round_trip(brokers: Brokers, client: Client, scenario: Scenario, data: Data) -> None:
    topic = client.topic(scenario)
    assert data["values"] == [f"{topic}-{i}" for i in range(RECORDS)]
    # and the broker holds those records, no more
    headers = stored_batch_headers(brokers.of(scenario, client), topic)
    assert sum(header.record_count for header in headers) == RECORDS


def check_refusal(client: Client, refusal: Refusal, data: Data) -> None:
    for call in ("producer", "admin"):
        outcome = data[call]
        if not outcome["failed"]:
            # not an AssertionError: no xfail covers a client that got in
            pytest.fail(f"the {call} got in", pytrace=False)
        if client.family == "java":
            assert outcome["class"] == refusal.java, f"{call}: {outcome['description']}"
            got = outcome["message"] or ""
        else:
            names = tuple(error["name"] for error in outcome["chain"])
            assert names == refusal.kafkajs, f"{call}: {outcome['chain']}"
            got = outcome["message"]
        if refusal.message is not None:
            assert refusal.message in got, f"{call}: {got!r}"


@dataclass(frozen=True)
class AclRefusal:
    """How a client call refused by an ACL fails: Java's exception class, and the type of
    the KafkaJSProtocolError kafkajs fails with (itself or wrapped)."""

    java: str
    kafkajs: str


TOPIC_REFUSED = AclRefusal(f"{ERRORS}.TopicAuthorizationException", "TOPIC_AUTHORIZATION_FAILED")
GROUP_REFUSED = AclRefusal(f"{ERRORS}.GroupAuthorizationException", "GROUP_AUTHORIZATION_FAILED")
CLUSTER_REFUSED = AclRefusal(
    f"{ERRORS}.ClusterAuthorizationException", "CLUSTER_AUTHORIZATION_FAILED"
)


def check_acl_refusal(
    client: Client, outcome: Data, refusal: AclRefusal, who: str, *, wrapped: bool = False
) -> None:
    """`who` failed with `refusal`'s error (`wrapped`: or with an error it causes)."""
    if not outcome["failed"]:
        pytest.fail(f"{who} was served", pytrace=False)
    if client.family == "java":
        classes = [outcome["class"], *outcome["causes"]] if wrapped else [outcome["class"]]
        assert refusal.java in classes, f"{who}: {outcome['description']}"
    else:
        types = [e.get("type") for e in outcome["chain"] if e["name"] == "KafkaJSProtocolError"]
        assert refusal.kafkajs in types, f"{who}: {outcome['chain']}"


def acls_of(broker: Broker) -> list[Acl]:
    """The broker's ACLs, as the drivers report them."""

    def read() -> list[Acl]:
        return [
            (
                b.resource_type.name,
                b.resource_name,
                b.pattern_type.name,
                b.principal,
                b.host,
                b.operation.name,
                b.permission.name,
            )
            for b in broker.state.acls.describe(AclFilter())
        ]

    return broker._on_loop(read)


def check_acl_step(brokers: Brokers, client: Client, scenario: Scenario, data: Data) -> None:
    broker = brokers.acl[client.name]
    step = scenario.acl_step
    if step == "acl_admin":
        # exactly the grants, each once
        assert sorted(tuple(acl) for acl in data["described"]) == sorted(GRANTS)
    elif step == "acl_served":
        assert data["values"] == [f"{ACL_TOPIC}-{i}" for i in range(RECORDS)]
        assert data["committed"] == RECORDS
        assert broker.committed_offsets(ACL_GROUP) == {(ACL_TOPIC, 0): RECORDS}
    elif step == "acl_produce_refused":
        check_acl_refusal(client, data["producer"], TOPIC_REFUSED, "bob's producer")
        # the topic held alice's records, no more, right after bob's send, and still does
        # once the story is over
        assert data["end_offset"] == RECORDS
        assert broker.end_offsets(ACL_TOPIC) == {0: RECORDS}, "after the whole story"
    elif step == "acl_consume_refused":
        # bob may not describe the topic: the consumer fails on its metadata before the
        # group's refusal reaches it (as against Kafka 4.4 and 3.9). Asked for the group's
        # committed offsets, which needs no topic metadata, he is refused on the group.
        check_acl_refusal(client, data["consumer"], TOPIC_REFUSED, "bob's consumer")
        offsets = data["offsets"]
        if client.family == "java":
            check_acl_refusal(client, offsets, GROUP_REFUSED, "bob's offset fetch")
        else:
            # kafkajs fails a refused coordinator look-up with an error of its own, having
            # logged the broker's
            if not offsets["failed"]:
                pytest.fail("bob's offset fetch was served", pytrace=False)
            names = [error["name"] for error in offsets["chain"]]
            assert names == ["KafkaJSGroupCoordinatorNotFound"], offsets["chain"]
            assert GROUP_REFUSED.kafkajs in offsets["logged"], offsets["logged"]
        assert broker.committed_offsets(ACL_GROUP) == {(ACL_TOPIC, 0): RECORDS}
    elif step == "acl_deleted":
        assert data["deleted"] == [list(ALICE_WRITES)]
        assert sorted(acls_of(broker)) == sorted(set(GRANTS) - {ALICE_WRITES})
        check_acl_refusal(client, data["producer"], TOPIC_REFUSED, "alice's producer")
        if client.family == "java":
            # A new idempotent producer needs WRITE on some topic (or IDEMPOTENT_WRITE on
            # the cluster) for its producer id: alice now has neither. The send fails with
            # that refusal, or with the producer's error state it caused, depending on
            # whether the record was queued before the refusal came.
            check_acl_refusal(
                client, data["new_producer"], CLUSTER_REFUSED, "alice's new producer", wrapped=True
            )
        assert data["end_offset"] == RECORDS
        assert broker.end_offsets(ACL_TOPIC) == {0: RECORDS}
    else:
        raise AssertionError(f"no ACL step {step}")


def _stderr_tail(run: Run, lines: int = 30) -> str:
    tail = run.stderr.strip().splitlines()[-lines:]
    return "\n".join(tail) if tail else "(empty)"


def _cases() -> list[Any]:
    return [
        pytest.param(
            client.name,
            scenario,
            id=f"{client.name}-{scenario.name}",
            marks=[pytest.mark.xfail(strict=True, raises=AssertionError, reason=scenario.missing)]
            if scenario.missing
            else [],
        )
        for client in CLIENTS
        for scenario in SCENARIOS
        if client.family in scenario.clients
    ]


@pytest.mark.parametrize(("client_run", "scenario"), _cases(), indirect=["client_run"])
def test_security_scenario(client_run: Run, scenario: Scenario, _brokers: Brokers) -> None:
    client = client_run.client
    where = f"{client.name}, scenario {scenario.name}"
    result = client_run.results.get(scenario.name)
    if result is None:
        happened = "was running" if scenario.name in client_run.started else "never started"
        pytest.fail(
            f"{where} {happened} when the run ended ({client_run.problem or 'no run-level error'})"
            f"\nstderr:\n{_stderr_tail(client_run)}",
            pytrace=False,
        )
    if not result["ok"]:
        pytest.fail(f"{where} failed in the driver:\n{result['error']}", pytrace=False)
    if scenario.acl_step is not None:
        check_acl_step(_brokers, client, scenario, result["data"])
    elif scenario.refusal is None:
        check_round_trip(_brokers, client, scenario, result["data"])
    else:
        check_refusal(client, scenario.refusal, result["data"])

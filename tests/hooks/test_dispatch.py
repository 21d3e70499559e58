"""The dispatcher's outcomes as the request log records them: what a failed test's report
shows must be what happened on the wire."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from harness.raw_client import RawClient, encode, make, make_request
from minibroker import Broker
from minibroker.config import BrokerConfig
from minibroker.dispatch import CloseConnection, Dispatcher, SteppedReply
from minibroker.handlers import registry
from minibroker.handlers.registry import RequestContext
from minibroker.protocol import messages
from minibroker.state.cluster import ClusterState, Node

METADATA = 3


def _dispatcher() -> Dispatcher:
    cluster = ClusterState(BrokerConfig())
    cluster.add_node(Node(node_id=0, host="127.0.0.1", port=9092))
    cluster.topics.create("orders", 1)
    return Dispatcher(cluster, node_id=0)


def _metadata_frame(version: int, correlation_id: int = 7) -> bytes:
    topic = make(METADATA, version, "MetadataRequestTopic", name="orders", topic_id=None)
    request = make_request(
        METADATA,
        version,
        topics=(topic,),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    return encode(METADATA, version, request, correlation_id)[4:]


def _framed(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


@pytest.fixture
def unencodable_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metadata answers with a topic name of None, which no version before v12 can carry
    (the shape of a bug once shipped for unknown topic ids at v10 and v11)."""
    served = registry.HANDLERS[METADATA]

    def broken(ctx: RequestContext, request: Any) -> Any:
        topic = ctx.make(
            "MetadataResponseTopic",
            error_code=ErrorCode.unknown_topic_id,
            name=None,
            topic_id=uuid.uuid4(),
            is_internal=False,
            partitions=(),
            topic_authorized_operations=-2147483648,
        )
        return ctx.response(
            throttle_time=datetime.timedelta(0),
            brokers=(),
            cluster_id=None,
            controller_id=-1,
            topics=(topic,),
            cluster_authorized_operations=-2147483648,
        )

    monkeypatch.setitem(registry.HANDLERS, METADATA, dataclasses.replace(served, handle=broken))


def test_answers_are_recorded_ok() -> None:
    dispatcher = _dispatcher()
    reply = dispatcher.dispatch(_metadata_frame(9))
    assert isinstance(reply, bytes)
    (record,) = dispatcher.recent
    assert (record.api, record.version, record.correlation_id, record.outcome) == (
        "Metadata",
        9,
        7,
        "ok",
    )


@pytest.mark.usefixtures("unencodable_metadata")
def test_a_response_that_fails_to_encode_closes_and_is_logged_as_such() -> None:
    dispatcher = _dispatcher()
    with pytest.raises(CloseConnection, match="failed to encode"):
        dispatcher.dispatch(_metadata_frame(9))
    (record,) = dispatcher.recent
    assert record.outcome == "closed: response failed to encode"
    # v12 carries a null name: the same handler's answer encodes there.
    assert isinstance(dispatcher.dispatch(_metadata_frame(12, correlation_id=8)), bytes)
    assert dispatcher.recent[-1].outcome == "ok"


@pytest.mark.usefixtures("unencodable_metadata")
def test_the_client_whose_response_fails_loses_only_its_connection() -> None:
    with Broker() as broker:
        broker.create_topic("orders", 1)
        with (
            RawClient(broker.bootstrap_servers) as broken,
            RawClient(broker.bootstrap_servers) as other,
        ):
            broken.send_bytes(_framed(_metadata_frame(9)))
            assert broken.is_closed_by_peer()
            answer = other.call(
                METADATA,
                12,
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            assert [t.name for t in answer.topics] == [None]
        outcomes = [(r.api, r.version, r.outcome) for r in broker.recent_requests()]
        assert ("Metadata", 9, "closed: response failed to encode") in outcomes
        assert ("Metadata", 12, "ok") in outcomes


def _create_topics_frame(count: int, prefix: str) -> bytes:
    topics = tuple(
        make(
            19,
            7,
            "CreatableTopic",
            name=f"{prefix}-{i}",
            num_partitions=1,
            replication_factor=1,
            assignments=(),
            configs=(),
        )
        for i in range(count)
    )
    request = make_request(
        19, 7, topics=topics, timeout=datetime.timedelta(seconds=5), validate_only=False
    )
    return encode(19, 7, request, 11)[4:]


def test_a_large_create_topics_is_answered_in_pieces_with_the_same_bytes() -> None:
    """Stepped, CreateTopics works through its topics a hundred at a time (the server
    serves other connections between pieces); the answer is the one given at once."""
    stepped_dispatcher, whole_dispatcher = _dispatcher(), _dispatcher()
    reply = stepped_dispatcher.dispatch(_create_topics_frame(250, "t"), stepped=True)
    assert isinstance(reply, SteppedReply)
    pieces = 0
    while True:
        try:
            next(reply.pieces)
        except StopIteration as done:
            stepped_answer = done.value
            break
        pieces += 1
    assert pieces == 2  # after topics 100 and 200
    whole_answer = whole_dispatcher.dispatch(_create_topics_frame(250, "t"))
    assert isinstance(whole_answer, bytes)

    def results(frame: bytes) -> list[tuple[str, int, int, int]]:
        _, response = messages.decode_response(frame[4:], 19, 7)
        return [
            (t.name, t.error_code.value, t.num_partitions, len(t.configs or ()))
            for t in response.topics
        ]

    # The same answer but for the topic ids, which are new random ids on each broker.
    assert results(stepped_answer) == results(whole_answer)
    assert [name for name, code, *_ in results(stepped_answer) if code == 0] == [
        f"t-{i}" for i in range(250)
    ]
    assert len(stepped_answer) == len(whole_answer)

"""The old versions Kafka 3.9 still serves, spoken over a socket as an old client would.

sarama with its default configuration commits offsets with OffsetCommit v1 and reads its
topics' configs with DescribeConfigs v0; kafkajs and others use ListOffsets v0. Each test
sends the old version, reads the answer in the old layout (legacy.read_response, so the
fields only old versions have are seen) and checks the effect with a current version:
what one version commits, creates or deletes, every other version sees.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from harness.raw_client import RawClient, make, make_request, produce_batch
from minibroker import Broker
from minibroker.protocol import legacy, records
from minibroker.testing.plugin import TopicFactory

LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 2, 3, 8, 9
JOIN_GROUP, SYNC_GROUP, API_VERSIONS = 11, 14, 18
CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS = 19, 20, 32
NONE, UNKNOWN_TOPIC_OR_PARTITION, ILLEGAL_GENERATION = 0, 3, 22
TOPIC_ALREADY_EXISTS, UNKNOWN_MEMBER_ID, INVALID_PARTITIONS = 36, 25, 37
TOPIC_RESOURCE = 2
LATEST, EARLIEST = -1, -2


def call_old(client: RawClient, api_key: int, version: int, **fields: Any) -> dict[str, Any]:
    """Send an old version; its answer as legacy.read_response gives it (wire names)."""
    correlation_id = client.send(api_key, version, make_request(api_key, version, **fields))
    frame = client.recv_frame()
    assert frame is not None, "the broker closed the connection"
    answer = legacy.read_response(frame, api_key, version)
    assert answer.pop("correlation_id") == correlation_id
    return answer


def commit(client: RawClient, version: int, group: str, topic: str, **fields: Any) -> list[int]:
    """Commit offset 10 + partition for partitions 0 and 1; the error codes."""
    partitions = tuple(
        make(
            OFFSET_COMMIT,
            version,
            "OffsetCommitRequestPartition",
            partition_index=index,
            committed_offset=10 + index,
            committed_metadata=f"v{version}",
        )
        for index in (0, 1)
    )
    answer = call_old(
        client,
        OFFSET_COMMIT,
        version,
        group_id=group,
        topics=(
            make(
                OFFSET_COMMIT,
                version,
                "OffsetCommitRequestTopic",
                name=topic,
                partitions=partitions,
            ),
        ),
        **fields,
    )
    return [p["error_code"] for t in answer["topics"] for p in t["partitions"]]


def committed(client: RawClient, version: int, group: str, topic: str) -> list[tuple[int, str]]:
    """(offset, metadata) of partitions 0 and 1, read with OffsetFetch `version`."""
    wanted = make(
        OFFSET_FETCH, version, "OffsetFetchRequestTopic", name=topic, partition_indexes=(0, 1)
    )
    response = client.call(
        OFFSET_FETCH, version, group_id=group, topics=(wanted,), require_stable=False
    )
    return [
        (int(p.committed_offset), p.metadata)
        for t in response.topics
        for p in sorted(t.partitions, key=lambda p: p.partition_index)
    ]


@pytest.mark.parametrize("version", [0, 1])
def test_offsets_committed_with_an_old_version_are_read_by_every_version(
    kafka_broker: Broker, kafka_topic: TopicFactory, version: int
) -> None:
    topic = kafka_topic(partitions=2)
    group = f"old-commit-{version}"
    with RawClient(kafka_broker.bootstrap_servers, client_id="sarama") as client:
        # No generation and no member (v0 has neither field): a commit outside any group.
        standalone = {"generation_id_or_member_epoch": -1, "member_id": ""}
        assert commit(client, version, group, topic, **standalone) == [NONE, NONE]
        expected = [(10, f"v{version}"), (11, f"v{version}")]
        assert committed(client, 0, group, topic) == expected
        assert committed(client, 7, group, topic) == expected


def test_offset_commit_v1_is_checked_against_the_groups_generation(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """v1 carries the generation and member id: a member of a live group commits with
    them, and a stale generation or an unknown member is refused as in newer versions."""
    topic = kafka_topic(partitions=2)
    group = "old-commit-generation"
    with RawClient(kafka_broker.bootstrap_servers, client_id="sarama") as client:
        # v3: the version such a client joins with (no second join for a member id).
        protocol = make(JOIN_GROUP, 3, "JoinGroupRequestProtocol", name="range", metadata=b"")
        joined = client.call(
            JOIN_GROUP,
            3,
            group_id=group,
            session_timeout=datetime.timedelta(seconds=30),
            rebalance_timeout=datetime.timedelta(seconds=30),
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(protocol,),
        )
        member, generation = joined.member_id, int(joined.generation_id)
        assert joined.error_code.value == NONE
        synced = client.call(
            SYNC_GROUP,
            3,
            group_id=group,
            generation_id=generation,
            member_id=member,
            group_instance_id=None,
            assignments=(),
        )
        assert synced.error_code.value == NONE
        live = {"generation_id_or_member_epoch": generation, "member_id": member}
        assert commit(client, 1, group, topic, **live) == [NONE, NONE]
        stale = {"generation_id_or_member_epoch": generation + 1, "member_id": member}
        assert commit(client, 1, group, topic, **stale) == [ILLEGAL_GENERATION] * 2
        stranger = {"generation_id_or_member_epoch": generation, "member_id": "stranger"}
        assert commit(client, 1, group, topic, **stranger) == [UNKNOWN_MEMBER_ID] * 2
        assert committed(client, 0, group, topic) == [(10, "v1"), (11, "v1")]


def test_list_offsets_v0_answers_a_list_holding_the_offset(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    topic = kafka_topic(partitions=1)
    with RawClient(kafka_broker.bootstrap_servers) as client:
        batch = records.build_batch([(None, b"a"), (None, b"b"), (None, b"c")], timestamp_ms=1)
        produce_batch(client.request, topic, 0, batch)

        def offsets(name: str, timestamp: int, partition: int = 0) -> tuple[int, list[int]]:
            wanted = make(
                LIST_OFFSETS,
                0,
                "ListOffsetsPartition",
                partition_index=partition,
                timestamp=timestamp,
            )
            answer = call_old(
                client,
                LIST_OFFSETS,
                0,
                replica_id=-1,
                topics=(
                    make(LIST_OFFSETS, 0, "ListOffsetsTopic", name=name, partitions=(wanted,)),
                ),
            )
            (result,) = answer["topics"][0]["partitions"]
            return result["error_code"], list(result["old_style_offsets"])

        assert offsets(topic, LATEST) == (NONE, [3])
        assert offsets(topic, EARLIEST) == (NONE, [0])
        assert offsets(topic, LATEST, partition=1) == (UNKNOWN_TOPIC_OR_PARTITION, [])
        assert offsets("no-such-topic", LATEST) == (UNKNOWN_TOPIC_OR_PARTITION, [])


def test_describe_configs_v0_reports_no_config_as_default(
    kafka_broker: Broker, kafka_topic: TopicFactory
) -> None:
    """v0 has is_default where newer versions have a config source; Kafka 3.9 (the last
    release serving v0) answers false for every config, set or not, and so does the
    broker. The values are the topic's."""
    topic = kafka_topic(partitions=1, configs={"retention.ms": "60000"})
    with RawClient(kafka_broker.bootstrap_servers, client_id="sarama") as client:
        resource = make(
            DESCRIBE_CONFIGS,
            0,
            "DescribeConfigsResource",
            resource_type=TOPIC_RESOURCE,
            resource_name=topic,
            configuration_keys=None,
        )
        answer = call_old(client, DESCRIBE_CONFIGS, 0, resources=(resource,))
    (result,) = answer["results"]
    assert (result["error_code"], result["resource_name"]) == (NONE, topic)
    configs = {c["name"]: (c["value"], c["is_default"]) for c in result["configs"]}
    assert configs["retention.ms"] == ("60000", False)
    assert configs["cleanup.policy"] == ("delete", False)
    assert not any(is_default for _, is_default in configs.values())


def test_topics_created_and_deleted_with_old_versions(kafka_broker: Broker) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:

        def create(version: int, name: str, partitions: int) -> dict[str, Any]:
            topic = make(
                CREATE_TOPICS,
                version,
                "CreatableTopic",
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=(),
                configs=(),
            )
            answer = call_old(
                client,
                CREATE_TOPICS,
                version,
                topics=(topic,),
                timeout=datetime.timedelta(seconds=5),
                validate_only=False,
            )
            (result,) = answer["topics"]
            assert result["name"] == name
            return result

        assert create(0, "old-v0", 3) == {"name": "old-v0", "error_code": NONE}
        assert create(0, "old-v0", 3) == {"name": "old-v0", "error_code": TOPIC_ALREADY_EXISTS}
        refused = create(1, "old-v1", 0)
        assert refused["error_code"] == INVALID_PARTITIONS and refused["error_message"]
        assert create(1, "old-v1", 2)["error_code"] == NONE

        def partitions() -> dict[str, int]:
            response = client.call(METADATA, 1, topics=None)
            return {t.name: len(t.partitions) for t in response.topics if t.name.startswith("old-")}

        assert partitions() == {"old-v0": 3, "old-v1": 2}
        answer = call_old(
            client,
            DELETE_TOPICS,
            0,
            topic_names=("old-v0", "no-such-topic"),
            timeout=datetime.timedelta(seconds=5),
        )
        assert answer["responses"] == (
            {"name": "old-v0", "error_code": NONE},
            {"name": "no-such-topic", "error_code": UNKNOWN_TOPIC_OR_PARTITION},
        )
        assert partitions() == {"old-v1": 2}


def test_api_versions_advertises_the_old_versions(kafka_broker: Broker) -> None:
    with RawClient(kafka_broker.bootstrap_servers) as client:
        answer = client.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    floors = {k.api_key: int(k.min_version) for k in answer.api_keys}
    for api_key in (
        LIST_OFFSETS,
        OFFSET_COMMIT,
        OFFSET_FETCH,
        CREATE_TOPICS,
        DELETE_TOPICS,
        DESCRIBE_CONFIGS,
    ):
        assert floors[api_key] == 0

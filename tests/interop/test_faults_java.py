"""The Java client's default producer (idempotent, acks=all) through leader moves: it
follows NOT_LEADER_OR_FOLLOWER to the new leader and every record lands once, in order.
(tests/cluster/test_cluster_operations.py does the same with librdkafka.)"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from minibroker.testing.plugin import ClusterFactory
from tests.interop.test_client_matrix import Built, Driver

PRODUCER = Driver("java-leader-move", "java", "jvm/faults", "LeaderMoveProducer", java_line="4")
MESSAGES = 400
RUN_TIMEOUT = 180


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    yield Built(tmp_path_factory)


def test_the_java_producer_follows_leader_moves_exactly_once_in_order(
    built: Built, kafka_cluster: ClusterFactory
) -> None:
    command = built.command(PRODUCER)
    cluster = kafka_cluster(brokers=3)
    topic = "java-moving"
    cluster.create_topic(topic, 1)
    process = subprocess.Popen(
        [
            *command,
            "-bootstrap",
            cluster.bootstrap_servers,
            "-topic",
            topic,
            "-messages",
            str(MESSAGES),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        leaders = [cluster.leaders(topic)[0]]
        for threshold in (100, 250):
            deadline = time.monotonic() + 60
            while cluster.end_offsets(topic)[0] < threshold and time.monotonic() < deadline:
                assert process.poll() is None, process.communicate()[1][-3000:]
                time.sleep(0.01)
            leaders.append((leaders[-1] + 1) % 3)
            cluster.move_leader(topic, 0, leaders[-1])
        out, err = process.communicate(timeout=RUN_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1]) == {"acked": MESSAGES, "failed": 0}
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "java-leader-move-check"}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < MESSAGES and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert values == [f"{i:04d}".encode() for i in range(MESSAGES)]
    assert cluster.end_offsets(topic) == {0: MESSAGES}
    moved_to = [r.node_id for r in cluster.recent_requests() if r.api == "Produce"]
    assert set(leaders) <= set(moved_to)  # it really wrote through every leader

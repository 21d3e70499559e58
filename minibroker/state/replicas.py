"""Replica lists in motion: reassignments (AlterPartitionReassignments) and leader
elections, as Kafka's controller makes them.

All replicas of a partition share its one log in this process, so a replica is in sync
whenever its node runs. A reassignment that adds replicas lists them as adding (and the
replicas it drops as removing) for CATCH_UP_SECONDS of the broker's clock, as long as a
new replica takes to copy the log, then completes: the partition is on its target
replicas, and a leader that left them hands over to the first target replica in sync
(at the next leader epoch). One that only drops or reorders replicas completes at once,
as Kafka's does when every target replica is already in sync.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from minibroker.state.topic_errors import TopicError
from minibroker.state.topics import Partition, Topic, TopicRegistry

NO_REASSIGNMENT_IN_PROGRESS = 85
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REPLICATION_FACTOR = 38
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELECTION_NOT_NEEDED = 84
# How long a new replica takes to catch up (broker clock; an advance skips it).
CATCH_UP_SECONDS = 1.0


@dataclass(slots=True)
class Reassignment:
    topic_id: object  # the topic's id (a topic deleted and created again is another)
    original: list[int]  # the replicas before it started (a cancel goes back to them)
    target: list[int]
    completes_at: float  # broker clock, monotonic seconds


class ReplicaControl:
    """Reassignments under way and leader elections over a cluster's topics.

    `running` gives the nodes up now; `leader_changed(topic, partition, node)` moves a
    partition's leader (a new leader epoch), `replicas_changed(topic)` says that a
    topic's replica lists or ISRs changed (its Metadata entries are stale).
    """

    def __init__(
        self,
        topics: TopicRegistry,
        running: Callable[[], Sequence[int]],
        leader_changed: Callable[[Topic, Partition, int], None],
        replicas_changed: Callable[[Topic], None],
    ) -> None:
        self.topics = topics
        self._running = running
        self._leader_changed = leader_changed
        self._replicas_changed = replicas_changed
        self.ongoing: dict[tuple[str, int], Reassignment] = {}

    def _partition(self, topic_name: str, index: int) -> tuple[Topic, Partition]:
        """The partition, or Kafka's UNKNOWN_TOPIC_OR_PARTITION (with its messages)."""
        topic = self.topics.get(topic_name)
        if topic is None:
            raise TopicError(
                UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic_name}."
            )
        if not 0 <= index < len(topic.partitions):
            raise TopicError(
                UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic_name}:{index}."
            )
        return topic, topic.partitions[index]

    def reassign(
        self,
        topic_name: str,
        index: int,
        target: Sequence[int] | None,
        now: float,
        *,
        allow_replication_factor_change: bool = True,
    ) -> None:
        """Move partition `index` of `topic_name` to `target` (None: cancel the move under
        way); TopicError with Kafka's code when it cannot."""
        topic, partition = self._partition(topic_name, index)
        key = (topic_name, index)
        ongoing = self.ongoing.get(key)
        if ongoing is not None and ongoing.topic_id != topic.topic_id:
            del self.ongoing[key]  # a move of a deleted topic of the same name
            ongoing = None
        if target is None:
            if ongoing is None:
                raise TopicError(NO_REASSIGNMENT_IN_PROGRESS, "")  # Kafka sends no message
            self._finish(topic, partition, ongoing.original)
            return
        self.topics.check_replicas(target, None, index, require_running=False)
        original = ongoing.original if ongoing else list(partition.replicas)
        if not allow_replication_factor_change and len(target) != len(original):
            raise TopicError(
                INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from {len(original)} to {len(target)} "
                "but allowReplicationFactorChange is false",
            )
        if ongoing is None and list(target) == partition.replicas:
            return  # already there: nothing to move
        adding = [r for r in target if r not in original]
        if not adding:
            self._finish(topic, partition, list(target))
            return
        self.ongoing[key] = Reassignment(
            topic.topic_id, original, list(target), now + CATCH_UP_SECONDS
        )
        partition.adding = adding
        partition.removing = [r for r in original if r not in target]
        partition.replicas = list(target) + partition.removing
        self._sync_isr(partition)
        self._replicas_changed(topic)

    def _finish(self, topic: Topic, partition: Partition, replicas: list[int]) -> None:
        """The partition is on `replicas` from now on: no move under way."""
        self.ongoing.pop((topic.name, partition.index), None)
        partition.replicas = replicas
        partition.adding = []
        partition.removing = []
        self._sync_isr(partition)
        if partition.leader not in replicas and partition.isr:
            self._leader_changed(topic, partition, partition.isr[0])
        self._replicas_changed(topic)

    def _sync_isr(self, partition: Partition) -> None:
        """The ISR: the replicas on running nodes, adding ones once caught up."""
        running = set(self._running())
        partition.isr = [
            r for r in partition.replicas if r in running and r not in partition.adding
        ]

    def nodes_changed(self) -> None:
        """A node stopped or started: every partition's ISR follows."""
        for topic in self.topics:
            changed = False
            for partition in topic.partitions:
                before = partition.isr
                self._sync_isr(partition)
                changed = changed or before != partition.isr
            if changed:
                topic.encoded.clear()  # (ISRs are not kept: they follow the nodes)

    def next_deadline(self) -> float | None:
        return min((r.completes_at for r in self.ongoing.values()), default=None)

    def tick(self, now: float) -> None:
        """Complete the moves whose new replicas have caught up (and run)."""
        running = set(self._running())
        for (topic_name, index), move in list(self.ongoing.items()):
            if move.completes_at > now:
                continue
            topic = self.topics.get(topic_name)
            if topic is None or topic.topic_id != move.topic_id:
                del self.ongoing[(topic_name, index)]  # deleted with its topic
                continue
            if all(r in running for r in move.target if r not in move.original):
                self._finish(topic, topic.partitions[index], move.target)
            else:
                move.completes_at = now + CATCH_UP_SECONDS  # a new replica's node is down

    def elect_preferred(self, topic_name: str, index: int) -> None:
        """Hand partition `index` of `topic_name` back to its first replica (TopicError:
        ELECTION_NOT_NEEDED when it leads, PREFERRED_LEADER_NOT_AVAILABLE when it is not
        in sync)."""
        topic, partition = self._partition(topic_name, index)
        preferred = partition.replicas[0]
        if partition.leader == preferred:
            raise TopicError(ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
        if preferred not in partition.isr:
            raise TopicError(
                PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."
            )
        self._leader_changed(topic, partition, preferred)

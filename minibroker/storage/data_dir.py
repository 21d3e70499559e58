"""A broker's data directory: what it keeps across restarts, and when it syncs.

Layout:
  meta.json         the layout version
  .lock             held (flock) while a broker uses the directory
  topics.json       every topic: name, id, partition leaders, replicas and leader
                    epochs, configs
  offsets.jsonl     committed offsets, one change per line; replayed and rewritten at start
  producer-ids      the end of the block of producer ids being handed out
  scram-credentials.json   SCRAM credentials set over the protocol (stored and server
                    keys, never passwords), readable by the owner only
  client-quotas.json   client quotas set over the protocol (AlterClientQuotas)
  share-state.jsonl the share groups' share-partition state, one change per line
                    (storage/share_state.py); replayed and rewritten at start
  transactions.json after a clean stop: each transactional id's producer id, epoch,
                    timeout and state
  logs/<topic id>/<partition>/   segment files (storage/segments.py), a recovery point
                    (written as segments are sealed) and a checkpoint after a clean stop
                    (storage/checkpoint.py); `.corrupt` files hold damaged bytes recovery
                    set aside

Rules:
- Flush policy `write`: a request that wrote records or offsets is answered only after
  what it wrote is fsynced. `interval`: everything written is fsynced every
  log_flush_interval_ms. `os`: the operating system writes back when it likes; a
  crash of the broker process loses nothing, a crash of the machine may. Every policy
  fsyncs everything at a clean stop.
- Topic metadata and producer-id blocks are written in one rename and fsynced at once,
  whatever the policy.
- A partition's log, index and producer state (the sequences of idempotent producers,
  open transactions) come from its clean stop's checkpoint when it matches the segment
  files; otherwise from its recovery point for the segments sealed before it, and from
  the batches of the segments after it (all of them without a recovery point). Damage
  found on the way is logged at ERROR with the file, the byte position and the offsets
  it took; the later batches are kept. A transaction still open then is
  aborted with a marker (the transaction coordinator's state is not kept), so
  read_committed readers go on.
- Producer ids are handed out in blocks of PRODUCER_ID_BLOCK; a block's end is written
  before its first id is given, so no id is given twice across restarts.
- Transactional ids are kept across a clean stop (transactions.json, read and deleted at
  the next start): an idle transactional producer goes on with its producer id and
  epoch. A transaction open at the stop is aborted at the start and its producer fenced
  (state/transactions.py). After a crash they start afresh: a transactional producer
  initializes again and gets a new producer id.
- Group membership is not kept: members rejoin after a restart, as after a coordinator
  move, and find their committed offsets. Offset expiry counts from the restart.
- At most `max_open_segment_files` segment files are open at once across the partitions
  (storage/open_files.py); a directory whose setting would leave no descriptors for the
  listener and clients under the process's limit is refused.
- A write or sync the disk refuses is logged with the file and the cause: the first at
  once, then one line per STORAGE_ERROR_LOG_INTERVAL seconds counting the others, so a
  full disk shows in the log without a line per request.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import resource
import shutil
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from minibroker.config import LOG_FLUSH_POLICIES
from minibroker.protocol.sasl import ScramCredential
from minibroker.state.cluster import ClusterState
from minibroker.state.offset_store import CommittedOffset
from minibroker.state.producers import PartitionProducers
from minibroker.state.quotas import Entity, make_entity
from minibroker.state.topics import Partition, Topic
from minibroker.storage import checkpoint
from minibroker.storage.open_files import (
    DescriptorPlan,
    OpenFiles,
    default_open_segment_files,
)
from minibroker.storage.segmented_log import SegmentedLog
from minibroker.storage.segments import (
    RecoveredBatch,
    Recovery,
    Segment,
    SegmentStore,
    recover,
    replace_file,
    segment_offset,
)
from minibroker.storage.share_state import ShareStateJournal
from minibroker.throttled_log import ThrottledLog

log = logging.getLogger("minibroker.storage")

LAYOUT_VERSION = 1
PRODUCER_ID_BLOCK = 1000
SCRAM_FILE = "scram-credentials.json"
QUOTAS_FILE = "client-quotas.json"
TRANSACTIONS_FILE = "transactions.json"
STORAGE_ERROR_LOG_INTERVAL = 10.0  # seconds between the lines counting storage errors

OffsetKey = tuple[str, int]


class DataDirError(Exception):
    """The directory cannot be used (taken by another broker, unknown layout, unreadable)."""


def descriptor_limit() -> int:
    """This process's soft limit of open files (0: none)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 0 if soft == resource.RLIM_INFINITY else soft


class DataDir:
    def __init__(
        self,
        path: str | os.PathLike[str],
        flush: str = "os",
        *,
        max_open_segment_files: int = 0,
        connections: int = 0,
    ) -> None:
        """`max_open_segment_files` 0 takes the default from the process's open-files
        limit; `connections` is how many the process's listeners may hold (to warn when the
        limit leaves fewer descriptors for them)."""
        if flush not in LOG_FLUSH_POLICIES:
            raise ValueError(f"log_flush={flush!r}: must be one of {', '.join(LOG_FLUSH_POLICIES)}")
        self.path = Path(path)
        self.flush = flush
        limit = descriptor_limit()
        budget = max_open_segment_files or default_open_segment_files(limit or 2**20)
        self.descriptors = DescriptorPlan(limit, budget, connections)
        self.open_files: OpenFiles[Segment] = OpenFiles(budget)
        self.storage_errors = ThrottledLog(STORAGE_ERROR_LOG_INTERVAL)
        self._stores: dict[uuid.UUID, list[SegmentStore]] = {}
        self._unsynced: set[SegmentStore] = set()
        self._journal_fd: int | None = None
        self._journal_unsynced = False
        self._lock_fd: int | None = None
        self._state: ClusterState | None = None
        self.truncated_bytes = 0  # what recovery cut from torn tails at the last start
        self.checkpointed_partitions = 0  # loaded from a clean stop's checkpoint
        self.scanned_partitions = 0  # rebuilt by reading every batch
        self.recovery_point_partitions = 0  # from a recovery point and the batches after it
        self.damage: list[str] = []  # what recovery set aside at the last start
        self._journaled: dict[Path, list[checkpoint.Described]] = {}  # in recovery points
        self._share_state = ShareStateJournal(self.path)

    # --- opening and closing ---

    def open(self, state: ClusterState, node_ids: Iterable[int]) -> None:
        """Take the directory and load it into `state` (the first time; later opens of
        the same DataDir only take the directory again)."""
        refusal = self.descriptors.refusal()
        if refusal is not None:
            raise DataDirError(f"data directory {self.path}: {refusal}")
        warning = self.descriptors.warning()
        if warning is not None and self._state is None:
            log.warning("data directory %s: %s", self.path, warning)
        self._lock()
        if self._state is not None:
            self._discard_checkpoints()  # the logs go on from memory, not from them
            self._share_state.reopen()
            return
        try:
            self._check_layout()
            self._state = state
            self._load_topics(state, set(node_ids))
            self._load_offsets(state)
            self._load_producer_ids(state)
            self._load_scram_credentials(state)
            self._load_client_quotas(state)
            self._share_state.load(state.share_partitions)
        except Exception:
            self.close()
            raise
        state.topics.new_log = self._new_log
        state.topics.on_change.append(self._topics_changed)
        state.topics.on_replicas_change.append(self._topics_changed)
        state.groups.on_offsets = self._offsets_changed
        state.producer_ids.reserve = self._reserve_producer_ids
        state.credentials.on_scram_change = self._scram_changed
        state.client_quotas.on_change = self._client_quotas_changed
        state.share_partitions.on_persist = self._share_state.changed
        state.storage = self
        self._load_transactions(state)

    def _lock(self) -> None:
        if self._lock_fd is not None:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirError(
                f"data directory {self.path} is in use by another broker (pid {holder})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    def _check_layout(self) -> None:
        meta = self.path / "meta.json"
        if not meta.exists():
            replace_file(meta, json.dumps({"layout": LAYOUT_VERSION}).encode())
            return
        try:
            version = json.loads(meta.read_text())["layout"]
        except (ValueError, KeyError, TypeError) as exc:
            raise DataDirError(f"{meta}: not a minibroker data directory ({exc})") from None
        if version != LAYOUT_VERSION:
            raise DataDirError(
                f"{meta}: layout {version}; this minibroker reads layout {LAYOUT_VERSION}"
            )

    def storage_error(self, what: str, exc: OSError) -> None:
        """Log a write or sync the disk refused (`exc` names the file), rate-limited."""
        count = self.storage_errors.occurred(time.monotonic())
        if count is None:
            return
        if count == 1:
            log.error("data directory %s: %s failed: %s", self.path, what, exc)
        else:
            log.error(
                "data directory %s: %d storage errors since the last report, the latest: "
                "%s failed: %s",
                self.path,
                count,
                what,
                exc,
            )

    def sync(self) -> None:
        """fsync everything written since the last sync."""
        for store in self._unsynced:
            store.sync()
        self._unsynced.clear()
        if self._journal_unsynced and self._journal_fd is not None:
            os.fsync(self._journal_fd)
        self._journal_unsynced = False
        self._share_state.sync()

    @property
    def log_dir(self) -> str:
        return str(self.path / "logs")

    def disk_usage(self) -> tuple[int, int]:
        usage = shutil.disk_usage(self.path)
        return usage.total, usage.free

    @property
    def dirty(self) -> bool:
        return bool(self._unsynced) or self._journal_unsynced or self._share_state.unsynced

    def request_done(self) -> None:
        """A request was handled: with flush policy `write`, make what it wrote durable
        before its answer goes out."""
        if self.flush == "write":
            self.sync()

    def close(self) -> None:
        """Sync everything, checkpoint each partition (storage/checkpoint.py) and release
        the directory (a later open takes it again)."""
        try:
            self.sync()
        except OSError as exc:
            self.storage_error("syncing at the stop", exc)
        for stores in self._stores.values():
            for store in stores:
                with contextlib.suppress(OSError):  # its sync failed just above
                    store.close()
        try:
            self._write_checkpoints()
            self._write_transactions()
        except OSError as exc:
            log.warning(
                "data directory %s: checkpoints not written (%s); the next start reads "
                "the segments",
                self.path,
                exc,
            )
        unlogged = self.storage_errors.unlogged()
        if unlogged:
            log.error(
                "data directory %s: %d storage errors since the last report", self.path, unlogged
            )
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None
        self._share_state.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- topics and their logs ---

    def _partitions(self) -> Iterable[tuple[Path, Partition]]:
        for topic in self._state.topics if self._state is not None else ():
            for partition in topic.partitions:
                yield self._partition_dir(topic.topic_id, partition.index), partition

    def _write_checkpoints(self) -> None:
        for directory, partition in self._partitions():
            # A log found corrupt is scanned at the next start, which sets the damage aside.
            if isinstance(partition.log, SegmentedLog) and not partition.log.corrupt:
                state = {**partition.log.state(), "producers": partition.producers.state()}
                checkpoint.write(directory, partition.log.store.segments, state)

    def _discard_checkpoints(self) -> None:
        for directory, _partition in self._partitions():
            checkpoint.discard(directory)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path / TRANSACTIONS_FILE)

    # --- transactional ids (kept across a clean stop only) ---

    def _write_transactions(self) -> None:
        if self._state is not None:
            saved = self._state.transactions.state()
            replace_file(self.path / TRANSACTIONS_FILE, json.dumps(saved).encode())

    def _load_transactions(self, state: ClusterState) -> None:
        path = self.path / TRANSACTIONS_FILE
        try:
            saved = json.loads(path.read_bytes())
            state.transactions.restore(state.clock.monotonic(), saved)
        except FileNotFoundError:
            return
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("%s unreadable (%r): transactional ids start afresh", path, exc)
        path.unlink()

    def _partition_dir(self, topic_id: uuid.UUID, index: int) -> Path:
        return self.path / "logs" / topic_id.hex / str(index)

    def _store_for(self, topic: Topic, index: int) -> SegmentStore:
        assert self._state is not None
        store = SegmentStore(
            self._partition_dir(topic.topic_id, index),
            lambda: int(topic.config("segment.bytes")),
            self._unsynced.add,
            segment_ms=lambda: int(topic.config("segment.ms")),
            now_ms=self._state.clock.wall_ms,
            open_files=self.open_files,
        )
        self._stores.setdefault(topic.topic_id, []).append(store)
        return store

    def _new_log(self, topic: Topic, index: int) -> SegmentedLog:
        partition_log = SegmentedLog(
            self._store_for(topic, index),
            lambda: int(topic.config("index.interval.bytes")),
            on_roll=lambda: self._rolled(topic, index, partition_log),
        )
        return partition_log

    def _rolled(self, topic: Topic, index: int, partition_log: SegmentedLog) -> None:
        """A segment was sealed: describe the sealed segments not yet in the partition's
        recovery point (storage/checkpoint.py)."""
        if partition_log.corrupt or index >= len(topic.partitions):
            return
        partition = topic.partitions[index]
        if partition.log is not partition_log:
            return  # still being recovered: the next roll writes it
        directory = partition_log.store.directory
        sealed = partition_log.store.segments[:-1]
        described = [checkpoint.describe(segment) for segment in sealed]
        written = self._journaled.get(directory, [])
        rewrite = described[: len(written)] != written
        new = sealed if rewrite else sealed[len(written) :]
        if not new:
            return
        state = {**partition_log.sealed_state(), "producers": partition.producers.state()}
        lines = [
            checkpoint.recovery_line(
                segment,
                partition_log.index_between(segment.start, segment.start + segment.size),
                state if segment is new[-1] else None,
            )
            for segment in new
        ]
        try:
            checkpoint.add_recovery_lines(directory, lines, rewrite=rewrite)
        except OSError as exc:
            log.warning("%s: recovery point not written (%s)", directory, exc)
            self._journaled.pop(directory, None)
            checkpoint.discard_recovery_point(directory)
            return
        self._journaled[directory] = described

    def _load_topics(self, state: ClusterState, node_ids: set[int]) -> None:
        path = self.path / "topics.json"
        if not path.exists():
            return
        try:
            saved = json.loads(path.read_text())
        except ValueError as exc:
            raise DataDirError(f"{path}: unreadable ({exc})") from None
        registry = state.topics
        now_ms = state.clock.wall_ms()
        for entry in saved:
            topic = Topic(
                name=entry["name"],
                topic_id=uuid.UUID(entry["id"]),
                partitions=[],
                configs=dict(entry["configs"]),
                internal=bool(entry.get("internal", False)),
                defaults=registry.defaults,
            )
            replica_lists = entry.get("replicas") or [[leader] for leader in entry["leaders"]]
            epochs = entry.get("epochs") or [0] * len(entry["leaders"])
            for index, leader in enumerate(entry["leaders"]):
                if leader not in node_ids:
                    leader = registry.next_leader()
                partition = self._recover_partition(topic, index, leader, now_ms)
                replicas = [r for r in replica_lists[index] if r in node_ids]
                partition.replicas = replicas if leader in replicas else [*replicas, leader]
                partition.isr = list(partition.replicas)
                epoch = max(int(epochs[index]), partition.log.leader_epoch)
                partition.leader_epoch = partition.log.leader_epoch = epoch
                topic.partitions.append(partition)
                state.producer_ids.seen(
                    max((p.producer_id for p in partition.producers.active()), default=-1)
                )
            registry.restore(topic)
        log.info(
            "data directory %s: %d partitions from their checkpoints, %d read batch by batch",
            self.path,
            self.checkpointed_partitions,
            self.scanned_partitions,
        )
        if self.recovery_point_partitions:
            log.info(
                "data directory %s: %d partitions from their recovery points and the "
                "segments written after them",
                self.path,
                self.recovery_point_partitions,
            )

    def _recover_partition(self, topic: Topic, index: int, leader: int, now_ms: int) -> Partition:
        """Partition `index` of `topic` as its segment files hold it."""
        partition_log = self._new_log(topic, index)
        partition = Partition(index=index, leader=leader, log=partition_log)
        producers = partition.producers

        directory = self._partition_dir(topic.topic_id, index)
        if self._from_checkpoint(directory, partition_log, producers):
            self.checkpointed_partitions += 1
            matched, _trusted, _state = checkpoint.take_recovery_point(directory)
            partition_log.trusted_end = partition_log.store.active_start + (
                partition_log.store.segments[-1].size if partition_log.store.segments else 0
            )
        else:
            matched = self._from_segments(directory, partition_log, producers)
        self._journaled[directory] = matched
        # The coordinator that would end them is gone: abort what a restart left open.
        for producer in producers.active():
            if partition_log.open_transaction_start(producer.producer_id) is not None:
                partition_log.append_marker(
                    producer.producer_id,
                    producer.epoch,
                    commit=False,
                    coordinator_epoch=0,
                    now_ms=now_ms,
                )
                producers.marker_written(producer.producer_id, producer.epoch, now_ms)
        return partition

    def _from_checkpoint(
        self, directory: Path, partition_log: SegmentedLog, producers: PartitionProducers
    ) -> bool:
        """Load a partition from its clean stop's checkpoint; whether it could."""
        checkpointed = checkpoint.take(directory)
        if checkpointed is None:
            return False
        segments, saved = checkpointed
        partition_log.store.adopt(segments)
        try:
            producers.load_state(saved["producers"])
            partition_log.load_state(saved)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("%s: checkpoint unreadable (%r); reading the segments", directory, exc)
            producers.load_state([])
            return False
        return True

    def _from_segments(
        self, directory: Path, partition_log: SegmentedLog, producers: PartitionProducers
    ) -> list[checkpoint.Described]:
        """Rebuild a partition from its recovery point and the batches of the segments
        after it (all of them without one); what the recovery point still describes."""

        def restore(found: RecoveredBatch) -> None:
            header = found.header
            partition_log.restore(
                header, found.length, commit=found.commit, segment_start=found.segment_start
            )
            if header.is_control:
                producers.marker_written(
                    header.producer_id, header.producer_epoch, header.max_timestamp
                )
            elif header.producer_id >= 0:
                producers.record(header, header.base_offset)

        matched, trusted, saved = checkpoint.take_recovery_point(directory)
        if saved is not None:
            partition_log.store.adopt(trusted)
            try:
                producers.load_state(saved["producers"])
                partition_log.load_state(saved)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning(
                    "%s: recovery point unreadable (%r); reading the segments", directory, exc
                )
                producers.load_state([])
                saved, matched = None, []
        if saved is None:
            trusted = []
        segments, recovery = recover(
            directory, restore, trusted=trusted, next_offset=partition_log.next_offset
        )
        partition_log.store.adopt([*trusted, *segments])
        partition_log.trusted_end = trusted[-1].start + trusted[-1].size if trusted else 0
        if trusted:
            self.recovery_point_partitions += 1
        else:
            self.scanned_partitions += 1
        self._report(directory, recovery, partition_log.next_offset)
        first = trusted or segments
        if first:
            partition_log.log_start_offset = max(
                partition_log.log_start_offset, segment_offset(first[0].path)
            )
        if recovery.log_start_offset > partition_log.log_start_offset:
            partition_log.delete_before(recovery.log_start_offset)
        return matched

    def _report(self, directory: Path, recovery: Recovery, log_end: int) -> None:
        self.truncated_bytes += recovery.truncated_bytes
        if recovery.truncated_bytes:
            log.warning(
                "%s: recovery cut %d bytes of unfinished writes from the last segment "
                "(the log ends at offset %d)",
                directory,
                recovery.truncated_bytes,
                log_end,
            )
        for damage in recovery.damage:
            self.damage.append(damage.describe())
            log.error("%s (the log ends at offset %d)", damage.describe(), log_end)

    def _topics_changed(self) -> None:
        state = self._state
        if state is None:
            return
        saved = [
            {
                "name": topic.name,
                "id": str(topic.topic_id),
                "internal": topic.internal,
                "configs": topic.configs,
                "leaders": [p.leader for p in topic.partitions],
                "replicas": [p.replicas for p in topic.partitions],
                "epochs": [p.leader_epoch for p in topic.partitions],
            }
            for topic in state.topics
        ]
        replace_file(self.path / "topics.json", json.dumps(saved, indent=1).encode())
        present = {topic.topic_id for topic in state.topics}
        for topic_id in [t for t in self._stores if t not in present]:
            for store in self._stores.pop(topic_id):
                self._unsynced.discard(store)
                store.remove()
            shutil.rmtree(self.path / "logs" / topic_id.hex, ignore_errors=True)

    # --- committed offsets ---

    def _load_offsets(self, state: ClusterState) -> None:
        path = self.path / "offsets.jsonl"
        groups: dict[str, dict[OffsetKey, CommittedOffset]] = {}
        if path.exists():
            with open(path, encoding="utf-8") as file:
                for line in file:
                    try:
                        change = json.loads(line)
                    except ValueError:
                        break  # a line the process did not finish writing: the end
                    _replay(groups, change)
        now = state.clock.monotonic()
        for group_id, offsets in groups.items():
            if offsets:
                state.groups.restore_offsets(now, group_id, offsets)
        lines = [
            _offset_line(group_id, key, stored)
            for group_id, offsets in groups.items()
            for key, stored in offsets.items()
        ]
        replace_file(path, "".join(lines).encode())
        self._journal_fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    def _offsets_changed(
        self, group_id: str, changes: dict[OffsetKey, CommittedOffset | None] | None
    ) -> None:
        if self._journal_fd is None:
            return
        if changes is None:
            text = json.dumps({"g": group_id, "gone": True}) + "\n"
        else:
            text = "".join(_offset_line(group_id, key, value) for key, value in changes.items())
        if text:
            os.write(self._journal_fd, text.encode())
            self._journal_unsynced = True

    # --- SCRAM credentials set over the protocol ---

    def _load_scram_credentials(self, state: ClusterState) -> None:
        path = self.path / SCRAM_FILE
        if not path.exists():
            return
        try:
            saved = json.loads(path.read_text())
            altered = {
                user: {mechanism: _credential_of(c) for mechanism, c in mechanisms.items()}
                for user, mechanisms in saved.items()
            }
        except (ValueError, KeyError, TypeError) as exc:
            raise DataDirError(f"{path}: unreadable ({exc})") from None
        state.credentials.restore_scram(altered)

    def _scram_changed(self, altered: dict[str, dict[str, ScramCredential]]) -> None:
        saved = {
            user: {mechanism: _credential_json(c) for mechanism, c in mechanisms.items()}
            for user, mechanisms in altered.items()
        }
        replace_file(self.path / SCRAM_FILE, json.dumps(saved, indent=1).encode(), 0o600)

    # --- client quotas set over the protocol ---

    def _load_client_quotas(self, state: ClusterState) -> None:
        path = self.path / QUOTAS_FILE
        if not path.exists():
            return
        try:
            saved = json.loads(path.read_text())
            quotas = {
                make_entity((str(t), None if n is None else str(n)) for t, n in item["entity"]): {
                    str(key): float(value) for key, value in item["values"].items()
                }
                for item in saved
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise DataDirError(f"{path}: unreadable ({exc})") from None
        state.client_quotas.restore(quotas)

    def _client_quotas_changed(self, quotas: dict[Entity, dict[str, float]]) -> None:
        saved = [{"entity": list(entity), "values": values} for entity, values in quotas.items()]
        replace_file(self.path / QUOTAS_FILE, json.dumps(saved, indent=1).encode())

    # --- producer ids ---

    def _load_producer_ids(self, state: ClusterState) -> None:
        path = self.path / "producer-ids"
        with contextlib.suppress(FileNotFoundError, ValueError):
            state.producer_ids.seen(int(path.read_text()) - 1)

    def _reserve_producer_ids(self, first_id: int) -> int:
        end = first_id + PRODUCER_ID_BLOCK
        replace_file(self.path / "producer-ids", str(end).encode())
        return end


def _credential_json(credential: ScramCredential) -> dict[str, Any]:
    return {
        "salt": base64.b64encode(credential.salt).decode(),
        "stored_key": base64.b64encode(credential.stored_key).decode(),
        "server_key": base64.b64encode(credential.server_key).decode(),
        "iterations": credential.iterations,
    }


def _credential_of(saved: dict[str, Any]) -> ScramCredential:
    return ScramCredential(
        base64.b64decode(saved["salt"]),
        base64.b64decode(saved["stored_key"]),
        base64.b64decode(saved["server_key"]),
        int(saved["iterations"]),
    )


def _offset_line(group_id: str, key: OffsetKey, stored: CommittedOffset | None) -> str:
    topic, partition = key
    entry: dict[str, Any] = {"g": group_id, "t": topic, "p": partition}
    if stored is None:
        entry["o"] = None
    else:
        entry.update(o=stored.offset, e=stored.leader_epoch, m=stored.metadata)
    return json.dumps(entry) + "\n"


def _replay(groups: dict[str, dict[OffsetKey, CommittedOffset]], change: dict[str, Any]) -> None:
    group_id = change["g"]
    if change.get("gone"):
        groups.pop(group_id, None)
        return
    offsets = groups.setdefault(group_id, {})
    key = (change["t"], change["p"])
    if change["o"] is None:
        offsets.pop(key, None)
    else:
        offsets[key] = CommittedOffset(change["o"], change["e"], change["m"])

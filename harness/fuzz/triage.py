"""Triage: replay frames one at a time against a fresh child broker to name the frame
behind a death (the frames in flight and the last ones sent on each connection), a hang
or a logged ERROR.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import struct
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harness.child_broker import ChildBroker
from harness.fuzz.campaign import (
    CLOSED,
    HANG,
    BrokerLog,
    Campaign,
    Hang,
    LogRecord,
    start_child,
    warm_up,
)
from harness.fuzz.mutation import INT32, LONG_POLL_KEYS, Mutation, Mutator, short_hex

# --- replays: name the frame behind a failure ---------------------------------------


async def exchange(bootstrap: str, data: bytes, timeout: float) -> str:
    """Send one frame on a fresh connection: 'response', 'closed' or 'timeout'."""
    host, _, port = bootstrap.rpartition(":")
    try:
        reader, writer = await asyncio.open_connection(host, int(port))
    except OSError:
        return "refused"
    try:
        writer.write(data)
        async with asyncio.timeout(timeout):
            (size,) = INT32.unpack(await reader.readexactly(4))
            await reader.readexactly(max(size, 0))
            return "response"
    except TimeoutError:
        return "timeout"
    except (asyncio.IncompleteReadError, ConnectionError, OSError, struct.error):
        return "closed"
    finally:
        writer.transport.abort()


def _died_within(broker: ChildBroker, seconds: float) -> bool:
    if broker.process is None:
        return False
    with contextlib.suppress(subprocess.TimeoutExpired):
        broker.process.wait(seconds)
    return not broker.alive()


@dataclass
class Killer:
    mutation: Mutation
    returncode: int | None
    alone: bool  # killed a fresh broker on its own

    def text(self) -> str:
        how = "kills a fresh broker on its own" if self.alone else "found by sequential replay"
        return (
            f"{self.mutation.describe()} {how} (return code {self.returncode}): "
            f"{short_hex(self.mutation.data)}"
        )


async def find_killer(mutator: Mutator, suspects: Sequence[int], limit: int = 200) -> Killer | None:
    """Replay suspects one at a time against a fresh broker until one kills it."""
    broker, _ = start_child()
    try:
        for index in suspects[:limit]:
            if not broker.alive():
                broker, _ = start_child()
            mutation = mutator.mutation(index)
            await exchange(broker.bootstrap, mutation.data, timeout=1.0)
            if _died_within(broker, 0.3):
                alone = await _kills_alone(mutation.data)
                return Killer(mutation, broker.returncode(), alone)
        return None
    finally:
        broker.stop()


async def _kills_alone(data: bytes) -> bool:
    broker, _ = start_child()
    try:
        await exchange(broker.bootstrap, data, timeout=1.0)
        return _died_within(broker, 0.5)
    finally:
        broker.stop()


@dataclass
class Failure:
    """One distinct ERROR logged by the broker, and a frame that reproduces it."""

    signature: str
    api: str | None  # of the request behind it, from the log line or the attributed frame
    count: int
    example: LogRecord
    suspects: list[int] = field(default_factory=list)  # attributed by source address
    reproducer: Mutation | None = None
    setup: list[Mutation] = field(default_factory=list)  # frames to send before it
    candidates: list[int] = field(default_factory=list)

    def text(self) -> str:
        api = f" [{self.api}]" if self.api else ""
        lines = [f"{self.signature}{api} (logged {self.count}x)", self.example.text()]
        for frame in self.setup:
            lines.append(f"after: {frame.describe()}: {short_hex(frame.data)}")
        if self.reproducer is not None:
            reproducer = self.reproducer
            lines.append(f"reproducer: {reproducer.describe()}: {short_hex(reproducer.data)}")
        elif self.candidates:
            tried = self.candidates[:16]
            lines.append(f"not reproduced on a fresh broker; tried {tried}")
        return "\n".join(lines)


def group_errors(records: Iterable[LogRecord], campaign: Campaign | None = None) -> list[Failure]:
    """One Failure per (signature, API): a line that does not name its API (an encoder
    error, say) gets it from the mutation its source address points to."""
    failures: dict[tuple[str, str | None], Failure] = {}
    for record in records:
        index = campaign.sent_by(record) if campaign is not None else None
        api = record.api
        if api is None and index is not None and campaign is not None:
            head = campaign.mutator.mutation(index).head
            api = head.api if head else None
        key = (record.signature, api)
        failure = failures.get(key)
        if failure is None:
            failure = failures[key] = Failure(record.signature, api, 0, record)
        failure.count += 1
        if index is not None and len(failure.suspects) < 8 and index not in failure.suspects:
            failure.suspects.append(index)
    return list(failures.values())


def _candidates(campaign: Campaign, failure: Failure, limit: int = 48) -> list[int]:
    """The attributed mutations, then those finished around the time the error was
    logged: same API and closed connections first."""
    at = failure.example.at
    scored = []
    for offset, finished in enumerate(campaign.finished_at):
        if not at - 1.0 <= finished <= at + 3.0:
            continue
        mutation = campaign.mutator.mutation(campaign.start_index + offset)
        head = mutation.head
        same_api = failure.api is not None and head is not None and head.api == failure.api
        closed = campaign.outcomes[offset] in (CLOSED, HANG)
        scored.append((not same_api, not closed, abs(finished - at), mutation.index))
    scored.sort()
    nearby = [index for *_, index in scored[:limit]]
    return list(dict.fromkeys([*failure.suspects, *nearby]))


async def _warm_child(frames: Sequence[bytes]) -> tuple[ChildBroker, BrokerLog]:
    # At WARNING, so that _log_barrier's marker line is logged.
    broker, log = start_child(log_level="WARNING")
    await warm_up(broker.bootstrap, frames)
    return broker, log


async def _log_barrier(broker: ChildBroker, log: BrokerLog, timeout: float = 10.0) -> None:
    """Until every line the broker has logged so far is in `log`: it logs one of ours
    after them, on the same stream (a negative frame size closes the connection with a
    WARNING naming the size). A broker that died has written all it will: read to EOF."""
    size = -1 - secrets.randbelow(1 << 24)
    marker = f"negative frame size {size}"
    start = log.count()
    await exchange(broker.bootstrap, INT32.pack(size), timeout=2.0)
    deadline = time.monotonic() + timeout
    while not log.logged(marker, start):
        if not broker.alive():
            await asyncio.to_thread(log.join)
            return
        if time.monotonic() > deadline:
            return  # a broker too old to log the marker: what was read is what there is
        await asyncio.sleep(0.02)


async def _try(
    broker: ChildBroker, log: BrokerLog, failure: Failure, setup: Sequence[Mutation], m: Mutation
) -> bool:
    """Replay setup frames, then `m`; True if `m` made the broker log the failure."""
    for frame in setup:
        await exchange(broker.bootstrap, frame.data, timeout=1.0)
    # A frame's lines are logged before it is answered or its connection closed, and read
    # in the order they were written: between a barrier after the setup frames and one
    # after `m`, the lines are m's (or a setup frame's still pending, a join say).
    await _log_barrier(broker, log)
    since = log.count()
    head = m.head
    # A join may be answered (and its answer fail) only when the rebalance completes.
    waits = head is not None and head.api_key in LONG_POLL_KEYS
    await exchange(broker.bootstrap, m.data, timeout=8.0 if waits else 2.0)
    await _log_barrier(broker, log)
    return any(r.signature == failure.signature for r in log.errors_from(since))


async def find_reproducers(
    campaign: Campaign, failures: Sequence[Failure], warm: Sequence[bytes] = ()
) -> None:
    """For each failure, replay its attributed mutations and those finished near its log
    time, one at a time against a fresh (warmed-up) broker, until one logs the same
    signature. Failures that need state are retried after the reproducers of the others
    (a group member created by one frame and described by the next, say)."""

    def same_api(failure: Failure, mutation: Mutation) -> bool:
        head = mutation.head
        return failure.api is None or (head is not None and head.api == failure.api)

    async def search(failure: Failure, setup: Sequence[Mutation], limit: int) -> None:
        broker, log = await _warm_child(warm)
        try:
            for index in failure.candidates[:limit]:
                mutation = campaign.mutator.mutation(index)
                if not same_api(failure, mutation):
                    continue
                if not broker.alive():
                    broker.stop()
                    broker, log = await _warm_child(warm)
                if await _try(broker, log, failure, setup, mutation):
                    failure.reproducer = mutation
                    failure.setup = await minimal(failure, list(setup), mutation)
                    return
        finally:
            broker.stop()

    async def minimal(failure: Failure, setup: list[Mutation], m: Mutation) -> list[Mutation]:
        """Drop setup frames the failure does not need, one at a time."""
        for frame in list(setup):
            fewer = [f for f in setup if f is not frame]
            broker, log = await _warm_child(warm)
            try:
                if await _try(broker, log, failure, fewer, m):
                    setup = fewer
            finally:
                broker.stop()
        return setup

    for failure in failures:
        failure.candidates = _candidates(campaign, failure)
        await search(failure, (), limit=len(failure.candidates))
    # Setup candidates: confirmed reproducers, else each failure's attributed frame.
    found = [
        f.reproducer or campaign.mutator.mutation(f.suspects[0])
        for f in failures
        if f.reproducer is not None or f.suspects
    ]
    for failure in failures:
        setup = [m for m in found if not same_api(failure, m)]
        if failure.reproducer is None and setup:
            await search(failure, setup, limit=8)


async def confirm_hang(hang: Hang, timeout: float, warm: Sequence[bytes] = ()) -> None:
    broker, _ = await _warm_child(warm)
    try:
        outcome = await exchange(broker.bootstrap, hang.data, timeout=timeout)
        hang.note += (
            "; reproduced alone on a fresh broker"
            if outcome == "timeout"
            else f"; alone on a fresh broker: {outcome}"
        )
    finally:
        broker.stop()

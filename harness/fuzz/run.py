"""One whole fuzz run (capture or load a corpus, campaign, checks, triage) and its
report: what the CI test (tests/hardening/test_fuzz.py) and the long run (tools/fuzz.py)
call.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.fuzz.campaign import (
    Campaign,
    CampaignResult,
    api_version_ranges,
    check_produce_fetch,
    check_sentinel,
    start_child,
    warm_up,
    write_sentinel,
)
from harness.fuzz.corpus import Corpus
from harness.fuzz.mutation import Mutator
from harness.fuzz.triage import (
    Failure,
    Killer,
    confirm_hang,
    find_killer,
    find_reproducers,
    group_errors,
)

# --- one whole run -----------------------------------------------------------------


@dataclass
class FuzzReport:
    campaign: CampaignResult
    corpus: str
    killer: Killer | None = None
    failures: list[Failure] = field(default_factory=list)
    check_problems: list[str] = field(default_factory=list)
    stderr_tail: str = ""

    def fatal(self) -> list[str]:
        """What the campaign exists to rule out: a dead or hung broker, changed data."""
        result = self.campaign
        found: list[str] = []
        if result.died:
            found.append(
                f"the broker died (return code {result.returncode}) during seed {result.seed}; "
                f"mutations in flight {result.in_flight}"
            )
            if self.killer is not None:
                found.append(f"killing frame: {self.killer.text()}")
            else:
                suspects = result.suspects[:8]
                found.append(f"no single frame reproduced it; last suspects {suspects}")
        found += [f"hang: {hang.text()}" for hang in result.hangs]
        if result.counts["hangs"] > len(result.hangs):
            found.append(f"... {result.counts['hangs']} hangs in all")
        found += self.check_problems
        return found

    def errors(self) -> list[str]:
        """ERRORs the broker logged: a request that broke a handler or the encoder. The
        broker survives them (the client loses its connection), but each is a bug."""
        return [f"broker ERROR: {failure.text()}" for failure in self.failures]

    def problems(self) -> list[str]:
        return self.fatal() + self.errors()

    def frames(self) -> dict[str, bytes]:
        """Every frame the report names, whole: file name -> bytes."""
        found: dict[str, bytes] = {}
        if self.killer is not None:
            found[f"killer-{self.killer.mutation.index}.hex"] = self.killer.mutation.data
        for hang in self.campaign.hangs:
            found[f"hang-{hang.index}.hex"] = hang.data
        for number, failure in enumerate(self.failures):
            for step, frame in enumerate(failure.setup):
                found[f"error-{number}-setup-{step}-{frame.index}.hex"] = frame.data
            if failure.reproducer is not None:
                found[f"error-{number}-{failure.reproducer.index}.hex"] = failure.reproducer.data
        return found

    def save(self, directory: Path, corpus: Corpus | None = None) -> Path:
        """Write the report, each named frame (hex, size prefix included) and the corpus,
        with which `tools/fuzz.py --corpus` regenerates every mutation of the run."""
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in self.frames().items():
            (directory / name).write_text(data.hex() + "\n")
        lines = [self.text()]
        if corpus is not None:
            corpus.dump(directory / "corpus.txt")
            seed = self.campaign.seed
            lines.append(
                f"mutation I again: python tools/fuzz.py --corpus {directory / 'corpus.txt'} "
                f"--seed {seed} --start I --mutations 1"
            )
        path = directory / "fuzz-report.txt"
        path.write_text("\n".join(lines) + "\n")
        return path

    def text(self) -> str:
        lines = [f"corpus: {self.corpus}", f"summary: {self.campaign.line()}"]
        for kind, count in self.campaign.anomalies.items():
            lines.append(f"anomaly {kind} x{count}: {self.campaign.anomaly_examples[kind]}")
        lines += self.problems()
        if self.stderr_tail:
            lines.append(f"broker stderr tail:\n{self.stderr_tail}")
        return "\n".join(lines)


async def fuzz(
    corpus: Corpus,
    seed: int,
    mutations: int,
    *,
    concurrency: int = 24,
    timeout: float = 10.0,
    long_poll_cap: float = 20.0,
    start: int = 0,
    replay: bool = True,
    progress: Callable[[CampaignResult], None] | None = None,
    progress_every: float = 5.0,
    broker_settings: Mapping[str, Any] | None = None,
) -> FuzzReport:
    """Capture-independent part of a run: child broker, sentinel, campaign, checks, replays.
    Without `broker_settings` the broker is `attacked_broker_settings`' own."""
    with tempfile.TemporaryDirectory(prefix="minibroker-fuzz-") as data_dir:
        settings = attacked_broker_settings(Path(data_dir))
        return await _fuzz(
            corpus, seed, mutations, concurrency=concurrency, timeout=timeout,
            long_poll_cap=long_poll_cap, start=start, replay=replay, progress=progress,
            progress_every=progress_every,
            broker_settings=settings if broker_settings is None else broker_settings,
        )  # fmt: skip


def attacked_broker_settings(data_dir: Path) -> dict[str, Any]:
    """The broker a campaign attacks: one that keeps a data directory (so mutated
    produces, transaction markers, producer state and group offsets go through the
    storage code) and has ACLs on with the plaintext principal a super user (mutated
    CreateAcls, DescribeAcls and DeleteAcls go through the ACL store while the campaign's
    own requests stay allowed)."""
    return {"data_dir": str(data_dir), "acls_enabled": True, "super_users": "User:ANONYMOUS"}


async def _fuzz(
    corpus: Corpus,
    seed: int,
    mutations: int,
    *,
    concurrency: int,
    timeout: float,
    long_poll_cap: float,
    start: int,
    replay: bool,
    progress: Callable[[CampaignResult], None] | None,
    progress_every: float,
    broker_settings: Mapping[str, Any],
) -> FuzzReport:
    broker, log = start_child(**dict(broker_settings))
    try:
        versions = await api_version_ranges(broker.bootstrap)
        await warm_up(broker.bootstrap, corpus.frames)
        sentinel = await write_sentinel(broker.bootstrap)
        mutator = Mutator(corpus.frames, seed, versions)
        campaign = Campaign(
            mutator,
            broker.bootstrap,
            mutations,
            alive=broker.alive,
            returncode=broker.returncode,
            rss=broker.peak_rss_bytes,
            concurrency=concurrency,
            timeout=timeout,
            long_poll_cap=long_poll_cap,
            start=start,
            progress=progress,
            progress_every=progress_every,
        )
        result = await campaign.run()
        problems: list[str] = []
        if broker.alive():
            for check in (
                check_sentinel(broker.bootstrap, sentinel),
                check_produce_fetch(broker.bootstrap),
            ):
                try:
                    problems += await check
                except Exception as exc:
                    problems.append(f"check after the campaign failed: {exc!r}")
            with contextlib.suppress(Exception):
                result.peak_rss = max(result.peak_rss, broker.peak_rss_bytes())
    finally:
        broker.stop()
        log.join()
    report = FuzzReport(result, corpus.describe(), check_problems=problems)
    records = log.errors()
    if result.died:  # the crash report is shown with the death, not as an ERROR of its own
        records = [r for r in records if r.level != "OUTPUT"]
    report.failures = group_errors(records, campaign)
    if result.died:
        report.stderr_tail = "\n".join(r.text(8) for r in list(log.records)[-3:])
    if replay:
        if result.died:
            report.killer = await find_killer(mutator, result.suspects)
        await find_reproducers(campaign, report.failures[:20], corpus.frames)
        for hang in result.hangs[:5]:
            await confirm_hang(hang, timeout, corpus.frames)
    return report


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default

"""Fuzz campaign: frames captured from real clients, mutated, never kill or hang the broker.

`pytest -m fuzz` selects it. MINIBROKER_FUZZ_MUTATIONS (default 50,000) and
MINIBROKER_FUZZ_SEED change the campaign; MINIBROKER_FUZZ_BROKER_SOURCE points the child
broker at another copy of the package (e.g. `git archive HEAD minibroker`), to see the
campaign fail on code without a fix. tools/fuzz.py runs the same engine for longer.
"""

from __future__ import annotations

import asyncio
import faulthandler
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.fuzz.corpus import Corpus, capture_corpus
from harness.fuzz.mutation import PRODUCE, Mutator, find_length_fields, head_of, is_flexible
from harness.fuzz.run import env_int, fuzz

pytestmark = [
    pytest.mark.fuzz,
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]


class FuzzFindings(UserWarning):
    """ERRORs the broker logged during the campaign, each with a reproducing frame."""


MUTATIONS = env_int("MINIBROKER_FUZZ_MUTATIONS", 50_000)
SEED = env_int("MINIBROKER_FUZZ_SEED", 20_260_509)
CONCURRENCY = env_int("MINIBROKER_FUZZ_CONCURRENCY", 24)
STRICT = env_int("MINIBROKER_FUZZ_STRICT", 0) == 1
WATCHDOG_SECONDS = 900

# What the scenarios send: produce, fetch, list offsets, metadata, the group protocol,
# offsets, admin calls, idempotent producer ids, transactions, cluster description.
EXPECTED_APIS = {0, 1, 2, 3, 8, 9, 10, 11, 13, 14, 15, 16, 18, 19, 20, 22, 32, 37, 42, 60}
EXPECTED_APIS |= {24, 25, 26, 28}  # AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit
EXPECTED_APIS |= {68, 69}  # ConsumerGroupHeartbeat, ConsumerGroupDescribe
EXPECTED_APIS |= {44, 76, 78, 79}  # IncrementalAlterConfigs; the share group's APIs
EXPECTED_APIS |= {29, 30, 31}  # DescribeAcls, CreateAcls, DeleteAcls
EXPECTED_APIS |= {50, 51}  # DescribeUserScramCredentials, AlterUserScramCredentials
EXPECTED_APIS |= {48, 49}  # DescribeClientQuotas, AlterClientQuotas


@pytest.fixture(scope="session")
def fuzz_corpus() -> Corpus:
    return capture_corpus()


@pytest.fixture
def watchdog() -> Iterator[None]:
    """A harness bug must fail the run with every thread's stack, never hang it."""
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


def test_capture_records_every_scenario(fuzz_corpus: Corpus) -> None:
    assert not fuzz_corpus.errors, fuzz_corpus.errors
    missing = EXPECTED_APIS - fuzz_corpus.api_keys()
    assert not missing, f"no frames captured for api keys {missing}: {fuzz_corpus.describe()}"
    clients = {frame[14 : 14 + 8] for frame in fuzz_corpus.frames}
    assert any(c.startswith(b"aiokafka") for c in clients), clients
    assert any(c.startswith(b"kafka-py") for c in clients), clients
    assert any(c.startswith(b"rdkafka") for c in clients), clients


def test_mutations_depend_only_on_corpus_seed_and_index(fuzz_corpus: Corpus) -> None:
    first, again = Mutator(fuzz_corpus.frames, 7), Mutator(fuzz_corpus.frames, 7)
    other = Mutator(fuzz_corpus.frames, 8)
    indices = [0, 1, 2, 999, 123_456]
    assert [first.mutation(i).data for i in indices] == [again.mutation(i).data for i in indices]
    assert [first.mutation(i).data for i in indices] != [other.mutation(i).data for i in indices]
    consistent = sum(first.mutation(i).consistent for i in range(2000))
    assert 1700 < consistent < 2000  # the size prefix mostly matches the body


def test_length_fields_are_found_in_produce_frames(fuzz_corpus: Corpus) -> None:
    for frame in fuzz_corpus.frames:
        body = frame[4:]
        head = head_of(body)
        assert head is not None
        if head.api_key != PRODUCE:
            continue
        flexible = is_flexible(head.api_key, head.api_version)
        fields = find_length_fields(body, flexible)
        strong = {f.offset for f in fields if f.strong}
        assert 8 in strong, "the header's client_id length"
        # The topic name: a length whose bytes are printable (int16 or compact varint).
        assert any(f.offset > 10 and f.value > 1 for f in fields if f.strong)


def test_fuzz_campaign_never_kills_or_hangs_the_broker(
    fuzz_corpus: Corpus, tmp_path: Path, watchdog: None
) -> None:
    report = asyncio.run(fuzz(fuzz_corpus, SEED, MUTATIONS, concurrency=CONCURRENCY))
    saved = report.save(tmp_path, fuzz_corpus)
    print(report.text())
    assert not report.fatal(), f"{report.text()}\n(frames in full: {saved.parent})"
    assert report.campaign.done == MUTATIONS
    if report.errors():
        # The broker survived them (only the sender's connection closed), so by default
        # they are reported, not failed; MINIBROKER_FUZZ_STRICT=1 fails on them too.
        message = "\n".join(report.errors()) + f"\n(frames in full: {saved.parent})"
        if STRICT:
            pytest.fail(message)
        warnings.warn(FuzzFindings(message), stacklevel=1)

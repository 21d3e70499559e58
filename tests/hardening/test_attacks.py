"""Regression tests for the attacks measured against `python -m minibroker` on loopback.

Each test runs one attack from harness/attack_catalogue.py against a fresh broker in a
child process and checks what a user of the broker would notice:
- the broker process is still alive;
- its peak RSS stayed below baseline + stored data + 256 MiB (tighter where it makes
  sense);
- an honest producer (one message per request, acks=1, its own process) is not starved:
  it keeps at least 0.35x its baseline rate while the attack is under way and is back to
  0.6x within 2 s of the attack's end (the broken broker measured 0.00x-0.3x); the
  targets of 0.5x and 0.9x are measured and reported by bench/hostile.py;
- the data produced before the attack can still be read;
plus the attack's own promise (the connection of a broken frame is closed, a new client
is served, at most max_partitions_per_request partitions are created, ...).

The rates are ratios against a baseline measured a moment earlier in the same test,
against the same broker: a loose bound on a ratio, never an absolute timing, which is the
only kind of timing a test on a shared machine can afford. Each rate is taken twice, per
second of wall time and per second of the broker's CPU time, and a target counts as met
when either ratio meets it: with other test runs on the same 2 cores (load 4-7) the
wall rate of half-second windows varied by 21% (coefficient of variation), the per-CPU
rate by 7%, while an attack that stalls or taxes the broker drags both down. A test
whose only miss is a rate ratio is measured once more before it fails (except the slow
one). The watchdog in harness/attacks.py kills a broker whose RSS runs far past the bound, so a
regression fails in seconds instead of eating the machine's memory.

The test of the default settings (1,100 half-frame connections, a new client served
within 45 s) takes about 35 s; it is marked `slow` so it can be deselected with
`-m "not slow"`.
"""

from __future__ import annotations

import pytest

from harness.attack_catalogue import CODECS, HUGE_LENGTH_FRAMES, STORM_PAYLOADS, scenario
from harness.attacks import (
    TEST_AFTER_RATIO,
    TEST_DURING_RATIO,
    Measurement,
    measure,
    raise_fd_limit,
)

raise_fd_limit(8192)  # the lock-out tests hold 1,100 sockets here and in the child


def _check(name: str) -> Measurement:
    attack = scenario(name)
    result = measure(attack)
    print(result.describe())
    floors = (TEST_DURING_RATIO, TEST_AFTER_RATIO)
    if result.rate_failures(*floors) and not result.other_failures() and not attack.slow:
        # Only an honest-rate ratio missed its target, and everything else held: on a
        # shared machine a burst of other work can do that, so measure once more on a
        # fresh broker. A real slowdown misses it twice (the broken code measured 0.00x
        # to 0.3x where these targets are 0.5x and 0.9x). The slow test is not repeated,
        # to keep the file within about 3 minutes.
        result = measure(attack)
        print("again:", result.describe())
    assert not result.failures(*floors), result.describe()
    return result


# --- 1. declared lengths never drive allocation -----------------------------------------


@pytest.mark.parametrize("variant", sorted(HUGE_LENGTH_FRAMES))
def test_a_huge_declared_array_length_closes_only_that_connection(variant: str) -> None:
    _check(f"1 {variant}")


# --- 2. size prefixes and the receive budget --------------------------------------------


def test_size_prefixes_of_100_mib_reserve_nothing_and_time_out() -> None:
    _check("2 30 x 100 MiB size prefixes")


def test_bytes_in_flight_stay_within_queued_max_request_bytes() -> None:
    _check("2 30 x 20 MiB really sent (budget 64 MiB)")


# --- 3. long polls ----------------------------------------------------------------------


def test_long_polls_end_with_their_connection_and_do_not_tax_produce() -> None:
    _check("3 100 long polls x 1,000 partitions")


# --- 4. decompression bombs -------------------------------------------------------------


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_a_decompression_bomb_is_not_expanded(codec: str) -> None:
    _check(f"4 {codec} bomb, ListOffsets x10")


# --- 5. groups made by anonymous commits ------------------------------------------------


def test_twenty_thousand_anonymous_groups_do_not_slow_produce() -> None:
    _check("5 20,000 anonymous groups")


def test_empty_groups_expire_after_offsets_retention() -> None:
    _check("5 20,000 anonymous groups expire")


# --- 6. connection slots and idle connections -------------------------------------------


def test_half_frames_do_not_lock_out_new_clients() -> None:
    _check("6 60 half frames, max_connections 50")


def test_idle_connections_do_not_lock_out_new_clients() -> None:
    _check("6 60 idle connections, max_connections 50")


def test_idle_connections_hold_no_receive_buffer() -> None:
    _check("6 1,000 idle connections: memory")


@pytest.mark.slow
def test_default_settings_serve_a_new_client_within_45_s_of_1100_half_frames() -> None:
    _check("6 1,100 half frames, default settings")


# --- 7. amplification, pipelining, mass creation ----------------------------------------


def test_a_fetch_repeating_one_partition_is_not_amplified() -> None:
    _check("7 Fetch naming a partition 5,000 times")


def test_unread_pipelined_fetches_hold_bounded_memory() -> None:
    _check("7 10,000 pipelined Fetches, unread")


def test_creating_100000_topics_in_one_request_is_refused_without_a_stall() -> None:
    _check("7 CreateTopics 100,000 topics")


def test_creating_3_topics_of_100000_partitions_is_refused_without_a_stall() -> None:
    _check("7 CreateTopics 3 x 100,000 partitions")


# --- 8. nulls ---------------------------------------------------------------------------


def test_null_arrays_get_an_answer_or_a_closed_connection_never_a_traceback() -> None:
    _check("8 null arrays, every API and version")


# --- 9. descriptors ---------------------------------------------------------------------


def test_a_data_directory_with_more_partitions_than_descriptors_keeps_serving() -> None:
    result = _check("9 one record to each of 1,500 partitions, open files 1,024")
    assert "1,500 of 1,500 records read back" in result.facts


# --- 10. the request recording ----------------------------------------------------------


def test_a_record_file_keeps_nothing_of_large_produces_in_memory() -> None:
    _check("10 200 x 900 KB produces, --record-file")


def test_the_in_memory_recording_stays_within_its_byte_budget() -> None:
    _check("10 200 x 900 KB produces, recorded in memory (16 MiB)")


# --- 11. connection churn ---------------------------------------------------------------


@pytest.mark.parametrize("kind", list(STORM_PAYLOADS))
def test_a_storm_of_new_connections_from_one_address_does_not_starve_others(kind: str) -> None:
    _check(f"11 2,000 new connections/s: {kind}")


# --- 12. ACLs at scale: 100,000 ACLs cost a decision no more than 100 do


def test_100000_acls_leave_the_honest_producer_its_rate() -> None:
    _check("12 100,000 ACLs created, then produce")


def test_describing_100000_acls_does_not_stop_other_clients() -> None:
    _check("12 100,000 ACLs, one DescribeAcls of all")


def test_metadata_of_every_topic_with_100000_acls_does_not_stop_other_clients() -> None:
    _check("12 100,000 ACLs, Metadata of 204 topics 50/s")

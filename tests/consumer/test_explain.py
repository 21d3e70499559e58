"""explain_assignment and its command line (seeds 000 and 002)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from minibroker.consumer.explain import Member, explain_assignment

ROOT = Path(__file__).resolve().parents[2]


def eighteen_consumers() -> list[Member]:
    return [Member(f"{host}-{i}", host) for host in "ABC" for i in range(6)]


def test_eighteen_consumers_idle_members_and_the_host_they_sit_on() -> None:
    result = explain_assignment(eighteen_consumers(), ["my-topic"], {"my-topic": 6}, "range")
    assert len(result.idle) == 12
    assert all(result.assignment[f"A-{i}"] for i in range(6))
    assert len(result.warnings) == 1
    warning = result.warnings[0]
    assert warning.startswith(
        "18 consumers, 6 partitions: 12 members will receive nothing; "
        "the first 6 in sort order are all on host A"
    )
    assert "hosts B, C will sit idle" in warning


def test_roundrobin_spreads_eighteen_consumers_over_hosts_but_still_warns_idle() -> None:
    result = explain_assignment(eighteen_consumers(), ["my-topic"], {"my-topic": 6}, "roundrobin")
    assert len(result.idle) == 12
    assert "12 members will receive nothing" in result.warnings[0]
    assert "host A" not in result.warnings[0]


def test_range_skew_across_many_topics() -> None:
    topics = {f"t{i}": 4 for i in range(5)}
    result = explain_assignment(["x", "y", "z"], list(topics), topics, "range")
    assert result.counts() == {"x": 10, "y": 5, "z": 5}
    (warning,) = result.warnings
    assert warning.startswith("range skew across 5 topics")
    assert "x gets 10 partitions, y gets 5 (difference 5)" in warning
    assert "roundrobin would give 6-7 each" in warning


def test_no_warnings_when_even() -> None:
    result = explain_assignment(["a", "b"], ["t"], {"t": 4}, "range")
    assert result.warnings == []
    assert result.counts() == {"a": 2, "b": 2}


def test_roundrobin_unequal_subscriptions_warns_about_starved_member() -> None:
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    result = explain_assignment(list(subs), subs, {"t0": 1, "t1": 2, "t2": 3}, "roundrobin")
    assert result.counts() == {"C0": 1, "C1": 1, "C2": 4}
    assert any("C2 gets 4 partitions while C1 gets 1" in w for w in result.warnings)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "minibroker.consumer.explain", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_eighteen_consumers() -> None:
    done = run_cli("--topic", "my-topic:6", "--hosts", "A,B,C", "--per-host", "6")
    assert done.returncode == 0, done.stderr
    assert "the first 6 in sort order are all on host A" in done.stdout
    assert "A-0 @A  [1]  my-topic: 0" in done.stdout


def test_cli_roundrobin_json() -> None:
    done = run_cli(
        "--topic", "t0:1", "--topic", "t1:2", "--topic", "t2:3",
        "--member", "C0=t0", "--member", "C1=t0,t1", "--member", "C2=t0,t1,t2",
        "--strategy", "roundrobin", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["assignment"] == {
        "C0": {"t0": [0]},
        "C1": {"t1": [0]},
        "C2": {"t1": [1], "t2": [0, 1, 2]},
    }


def test_cli_fail_on_warning_and_bad_input() -> None:
    warned = run_cli("--topic", "t:1", "--member", "a", "--member", "b", "--fail-on-warning")
    assert warned.returncode == 1
    bad = run_cli("--topic", "no-count", "--member", "a")
    assert bad.returncode == 2
    assert "NAME:PARTITIONS" in bad.stderr


def test_the_brokers_uniform_assignment_of_eighteen_members_on_six_partitions() -> None:
    """Kafka 4's protocol: the broker assigns; 12 of 18 still wait, and the warning says
    why the client cannot choose which."""
    members = [Member(f"{host}-{i}", host) for host in "ABC" for i in range(6)]
    result = explain_assignment(members, ["t"], {"t": 6}, group_protocol="consumer")
    assert result.strategy.startswith("uniform")
    assert sorted(result.counts().values()) == [0] * 12 + [1] * 6
    assert sorted(p for m in result.order for _, p in result.assignment[m]) == list(range(6))
    (warning,) = result.warnings
    assert "12 members will receive nothing" in warning and "random ids" in warning


def test_the_brokers_assignors_match_its_coordinator() -> None:
    """The explanation is what the coordinator computes: uniform keeps owners (sticky),
    range gives each member consecutive partitions on every topic."""
    previous = {"a": [("t", 4), ("t", 5)], "b": [("t", 0), ("t", 1), ("t", 2), ("t", 3)]}
    sticky = explain_assignment(
        ["a", "b", "c"], ["t"], {"t": 6}, previous=previous, group_protocol="consumer"
    )
    assert set(sticky.assignment["a"]) == {("t", 4), ("t", 5)}
    assert set(sticky.assignment["b"]) < set(previous["b"])
    ranged = explain_assignment(
        ["a", "b"], ["t", "u"], {"t": 3, "u": 3}, "range", group_protocol="consumer"
    )
    assert ranged.assignment["a"] == [("t", 0), ("t", 1), ("u", 0), ("u", 1)]
    assert ranged.assignment["b"] == [("t", 2), ("u", 2)]


def test_idle_members_are_pointed_to_a_share_group() -> None:
    """Where a consumer group leaves members idle, the warning suggests a share group, in
    which every member reads; where nobody idles, it does not."""
    for protocol in ("classic", "consumer"):
        result = explain_assignment(
            eighteen_consumers(), ["my-topic"], {"my-topic": 6}, group_protocol=protocol
        )
        (warning,) = result.warnings
        assert "a share group" in warning and "puts all 18 to work" in warning, warning
    per_topic = explain_assignment(["a", "b", "c"], ["t", "u"], {"t": 1, "u": 6})
    assert not per_topic.idle
    (warning,) = per_topic.warnings
    assert warning.startswith("topic t: 3 consumers, 1 partition: 2 members will receive nothing")
    assert "a share group" in warning and "puts all 3 to work" in warning
    even = explain_assignment(["a", "b", "c"], ["t"], {"t": 6})
    assert not any("share group" in w for w in even.warnings)

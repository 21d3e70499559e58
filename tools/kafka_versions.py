"""Derive the table of API versions each Kafka release's brokers served, for
`Broker(kafka_version=...)` (minibroker/protocol/kafka_releases.py, written by this tool).

    python tools/kafka_versions.py            # rewrite the table
    python tools/kafka_versions.py --check    # exit 1 if the table is not what it derives

Kafka 2.8 to 3.9 come from Kafka's message definitions as data (`../shared/kafka/
request-versions.json`: each request's `validVersions`, the listeners serving it and
whether its newest version is unstable): an API is in a release's table when a broker
listener (ZooKeeper-based or KRaft) serves it with default settings, up to its newest
stable version. Kafka 4.0
(which removed the versions of KIP-896), 4.2 (share groups generally available) and 4.4
come from their Java clients, kafka-clients 4.0.x, 4.2.x and 4.4.x, fetched with Maven:
`BrokerApiVersions.java` asks its ApiKeys what a broker listener serves. The same program
run on kafka-clients 3.9 gives the 3.9 table read from the data.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minibroker.commands.jars import fetch  # noqa: E402
from minibroker.testing import jvm  # noqa: E402

SHARED = ROOT.parent / "shared" / "kafka" / "request-versions.json"
TABLE = ROOT / "minibroker" / "protocol" / "kafka_releases.py"
PROGRAM = ROOT / "tools" / "kafka_versions" / "BrokerApiVersions.java"
# Release line -> the release whose definitions stand for it.
FROM_DATA = {"2.8": "2.8.2", "3.0": "3.0.2", "3.5": "3.5.2", "3.9": "3.9.0"}
FROM_CLIENT = {"4.0": "4.0.2", "4.2": "4.2.2", "4.4": "4.4.0"}
BROKER_LISTENERS = {"zkBroker", "broker"}
# APIs a 3.x broker serves only when a setting that is off by default turns them on:
# ConsumerGroupHeartbeat and ConsumerGroupDescribe need
# group.coordinator.rebalance.protocols to include "consumer" before Kafka 4.0.
OFF_BY_DEFAULT = {68, 69}

HEADER = '''"""The API versions each Kafka release's brokers served: release line -> api key ->
(oldest, newest). Written by tools/kafka_versions.py from Kafka's message definitions
(2.8-3.9) and the Java clients of Kafka 4.0, 4.2 and 4.4; do not edit by hand."""

from __future__ import annotations

from collections.abc import Mapping

RELEASES: Mapping[str, Mapping[int, tuple[int, int]]] = {
'''


def from_data(release: str) -> dict[int, tuple[int, int]]:
    apis = json.loads(SHARED.read_text())[release]
    table = {}
    for key, api in apis.items():
        listeners = api.get("listeners")
        if listeners is not None and not BROKER_LISTENERS & set(listeners):
            continue
        if int(key) in OFF_BY_DEFAULT:
            continue
        newest = api["max"] - (1 if api.get("latestVersionUnstable") else 0)
        if newest >= api["min"]:
            table[int(key)] = (api["min"], newest)
    return table


def from_client(version: str) -> dict[int, tuple[int, int]]:
    bundle = jvm.Bundle(f"kafka-clients-{version}", *jvm.KAFKA_CLIENT, version)
    jars = fetch(bundle, jvm.cache_dir())
    classpath = ":".join(str(jar) for jar in jars)
    done = subprocess.run(
        ["java", "-cp", classpath, str(PROGRAM)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return {int(key): (low, high) for key, (low, high) in json.loads(done.stdout).items()}


def render(tables: dict[str, dict[int, tuple[int, int]]]) -> str:
    lines = [HEADER]
    for line, table in tables.items():
        lines.append(f'    "{line}": {{\n')
        lines.extend(f"        {key}: {table[key]},\n" for key in sorted(table))
        lines.append("    },\n")
    lines.append("}\n")
    return "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    tables = {line: from_data(release) for line, release in FROM_DATA.items()}
    tables.update({line: from_client(version) for line, version in FROM_CLIENT.items()})
    text = render(tables)
    if args.check:
        same = TABLE.is_file() and TABLE.read_text() == text
        print(f"kafka_versions: {TABLE.relative_to(ROOT)} {'matches' if same else 'differs'}")
        return 0 if same else 1
    TABLE.write_text(text)
    print(f"kafka_versions: wrote {TABLE.relative_to(ROOT)} ({', '.join(tables)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

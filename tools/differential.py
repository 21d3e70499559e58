"""Run the differential comparison and print the table of what it compares (docs/test-suite.md).

    python tools/differential.py

Runs tests/differential (each client scenario through a recording proxy in front of
Apache Kafka 4.x and 3.9.x and in front of minibroker) with
MINIBROKER_DIFFERENTIAL_REPORT set, then prints one Markdown row per API: the versions
compared against each Kafka and how many distinct requests were compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def table(report: dict[str, dict[str, dict[str, object]]]) -> str:
    kafkas = sorted(report, reverse=True)
    seen: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for kafka, runs in report.items():
        for run in runs.values():
            compared = run["compared"]
            assert isinstance(compared, list)
            for api, version, count in compared:
                per_version = seen[api][kafka]
                per_version[version] = per_version.get(version, 0) + count
    header = "| API | " + " | ".join(f"vs Kafka {k}: versions (requests)" for k in kafkas)
    lines = [header + " |", "|---|" + "---|" * len(kafkas)]
    for api in sorted(seen):
        cells = []
        for kafka in kafkas:
            versions = seen[api].get(kafka, {})
            cells.append(
                ", ".join(f"v{v} ({n})" for v, n in sorted(versions.items())) if versions else "-"
            )
        lines.append(f"| {api} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    with tempfile.TemporaryDirectory() as work:
        target = Path(work) / "differential.json"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/differential"],
            cwd=ROOT,
            env={**os.environ, "MINIBROKER_DIFFERENTIAL_REPORT": str(target)},
            check=False,
        )
        if not target.exists():
            print("no comparison ran (see the pytest output above)", file=sys.stderr)
            return 1
        print(table(json.loads(target.read_text())))
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())

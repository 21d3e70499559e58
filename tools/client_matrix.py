"""Run the client matrix and print the README's compatibility table.

    python tools/client_matrix.py

Runs tests/interop/test_client_matrix.py (every client's scenario against a fresh
broker) with MINIBROKER_MATRIX_REPORT set, then prints one Markdown row per client: the
protocol versions it used for each API, and whether its scenario passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = (
    "CreateTopics",
    "DescribeConfigs",
    "Produce",
    "Fetch",
    "JoinGroup",
    "OffsetCommit",
    "OffsetFetch",
    "ListOffsets",
    "DescribeGroups",
    "DeleteTopics",
)


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "matrix.json"
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-rA",
                "tests/interop/test_client_matrix.py",
            ],
            cwd=ROOT,
            env={**os.environ, "MINIBROKER_MATRIX_REPORT": str(report)},
            capture_output=True,
            text=True,
            check=False,
        )
        outcomes = {
            line.split("[", 1)[1].split("]", 1)[0]: line.split(" ", 1)[0]
            for line in run.stdout.splitlines()
            if line.startswith(("PASSED ", "FAILED ", "SKIPPED ", "ERROR ")) and "[" in line
        }
        lines = json.loads(report.read_text()) if report.exists() else {}
    print("| client | speaks | " + " | ".join(COLUMNS) + " | scenario |")
    print("|---|---|" + "---|" * len(COLUMNS) + "---|")
    for name in sorted(set(lines) | set(outcomes)):
        line = lines.get(name, {})
        versions = line.get("versions", {})
        cells = [",".join(f"v{v}" for v in versions.get(api, [])) or "—" for api in COLUMNS]
        outcome = {"PASSED": "passes", "FAILED": "fails"}.get(outcomes.get(name, ""), "skipped")
        print(f"| {name} | {line.get('speaks', '')} | " + " | ".join(cells) + f" | {outcome} |")
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())

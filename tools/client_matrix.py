"""Run the client matrix and print the compatibility tables of docs/clients.md.

    python tools/client_matrix.py

Runs tests/interop/test_client_matrix.py (every client's driver of the scenario
catalogue in tests/interop/SCENARIOS.md against a fresh broker) with
MINIBROKER_MATRIX_REPORT set, then prints two Markdown tables: client x catalogue step
(done and checked, or what the client lacks), and client x the protocol versions it used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API_COLUMNS = (
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
    "AddPartitionsToTxn",
    "TxnOffsetCommit",
    "EndTxn",
)
# The catalogue's steps, grouped into the columns docs/clients.md shows.
STEP_COLUMNS = {
    "topic admin": ("create_topic", "describe_configs", "delete_topic"),
    "codecs": ("produce",),
    "keys": ("keyed",),
    "headers": ("headers",),
    "timestamps": ("timestamps",),
    "group consume + commit": ("consume_group", "committed"),
    "offsets": ("list_offsets",),
    "offsets for time": ("offsets_for_time", "from_timestamp"),
    "from latest": ("from_latest",),
    "rebalance 2 -> 3": ("rebalance",),
    "list / describe groups": ("list_groups", "describe_group"),
    "transactions, offsets, fencing": ("transactions", "transaction_offsets", "fencing"),
}
OUTCOMES = {"PASSED": "passes", "FAILED": "fails"}
CODEC_ORDER = ("none", "gzip", "snappy", "lz4", "zstd")


def run_matrix() -> tuple[dict[str, dict], dict[str, str], int]:
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
    return lines, outcomes, run.returncode


def step_cell(line: dict, steps: tuple[str, ...]) -> str:
    if "steps" not in line:
        return ""
    done = [step for step in steps if step in line["steps"]]
    if steps == ("produce",):
        used = set(line.get("codecs", []))
        return ", ".join(codec for codec in CODEC_ORDER if codec in used)
    if steps == ("keyed",):
        return line.get("partitioner", "")
    if len(done) == len(steps):
        return "yes"
    return "partly" if done else "—"


def main() -> int:
    lines, outcomes, code = run_matrix()
    names = sorted(set(lines) | set(outcomes))
    print("| client | " + " | ".join(STEP_COLUMNS) + " | scenario |")
    print("|---|" + "---|" * len(STEP_COLUMNS) + "---|")
    for name in names:
        line = lines.get(name, {})
        cells = [step_cell(line, steps) for steps in STEP_COLUMNS.values()]
        outcome = OUTCOMES.get(outcomes.get(name, ""), "skipped")
        print(f"| {name} | " + " | ".join(cells) + f" | {outcome} |")
    print()
    lacking = {name: lines[name]["skipped"] for name in names if lines.get(name, {}).get("skipped")}
    for name, skipped in lacking.items():
        reasons = "; ".join(f"{step}: {reason}" for step, reason in skipped.items())
        print(f"- {name} lacks {reasons}")
    print()
    print("| client | speaks | " + " | ".join(API_COLUMNS) + " |")
    print("|---|---|" + "---|" * len(API_COLUMNS))
    for name in names:
        line = lines.get(name, {})
        versions = line.get("versions", {})
        cells = [",".join(f"v{v}" for v in versions.get(api, [])) or "—" for api in API_COLUMNS]
        print(f"| {name} | {line.get('speaks', '')} | " + " | ".join(cells) + " |")
    return code


if __name__ == "__main__":
    raise SystemExit(main())

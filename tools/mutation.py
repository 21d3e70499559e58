"""Mutation testing of the protocol core: how many deliberate small bugs the tests catch.

    pip install -e ".[test,mutation]"
    python tools/mutation.py                  # run (resumes a stopped run), then summarise
    python tools/mutation.py --summary        # summarise the last run only
    python tools/mutation.py --survivors 40   # also show the diffs of 40 survivors

mutmut (configured in pyproject's [tool.mutmut]: which modules, which tests) rewrites
each function of protocol/, state/ and the produce, fetch, metadata, group and transaction
handlers into variants with one small change each (an operator, a constant, a dropped call), runs
the tests that reach that function against each variant, and records whether a test
failed (killed) or none did (survived). A survivor is either a blind spot of the tests
or a change that cannot alter behaviour (an equivalent mutant); docs/testing.md lists
the score and the survivors with the reason for each.

The run works in ./mutants (a copy of the sources) and can be stopped and resumed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Kafka's message definitions, for the known-answer tests (they sit beside the checkout).
SCHEMAS = ROOT.parent / "shared" / "kafka" / "messages-3.9"
RESULT_LINE = re.compile(r"^\s*(?P<name>\S+__mutmut_\d+): (?P<status>.+)$")
KILLED = {"killed", "timeout"}
# Not yet run (an interrupted run) or excluded; every other mutant counts, and one that
# no selected test reaches ("no tests") counts as a survivor.
NOT_RUN = {"not checked", "skipped"}


def run_mutmut(*args: str, capture: bool = False) -> str:
    env = dict(os.environ)
    if SCHEMAS.is_dir():
        env.setdefault("MINIBROKER_KAFKA_MESSAGES", str(SCHEMAS))
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", *args],
        cwd=ROOT,
        env=env,
        check=False,
        text=True,
        stdout=subprocess.PIPE if capture else None,
    )
    if done.returncode != 0:
        raise SystemExit(f"mutmut {' '.join(args)} exited with {done.returncode}")
    return done.stdout or ""


def module_of(mutant: str) -> str:
    """minibroker.state.log.x_append__mutmut_3 -> minibroker/state/log.py"""
    dotted = mutant.split(".x")[0] if ".x" in mutant else mutant.rsplit(".", 1)[0]
    return dotted.replace(".", "/") + ".py"


def results() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in run_mutmut("results", "--all", "true", capture=True).splitlines():
        match = RESULT_LINE.match(line)
        if match:
            found[match["name"]] = match["status"].strip()
    return found


def summarise(statuses: dict[str, str]) -> tuple[str, list[str]]:
    """A markdown table of the score per module, and the surviving mutants."""
    per_module: dict[str, Counter[str]] = defaultdict(Counter)
    for name, status in statuses.items():
        per_module[module_of(name)][status] += 1
    lines = [
        "| module | mutants | killed | survived | no test reaches it | not run | score |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    total: Counter[str] = Counter()
    for module in sorted(per_module):
        counts = per_module[module]
        total.update(counts)
        lines.append(row(module, counts))
    lines.append(row("**all**", total))
    survivors = sorted(
        f"{name} ({status})"
        for name, status in statuses.items()
        if status not in KILLED and status not in NOT_RUN
    )
    return "\n".join(lines), survivors


def row(label: str, counts: Counter[str]) -> str:
    total = sum(counts.values())
    killed = sum(counts[s] for s in KILLED)
    unreached = counts["no tests"]
    not_run = sum(counts[s] for s in NOT_RUN)
    survived = total - killed - unreached - not_run
    tested = total - not_run
    score = f"{100 * killed / tested:.1f} %" if tested else "-"
    return f"| {label} | {total} | {killed} | {survived} | {unreached} | {not_run} | {score} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summary", action="store_true", help="summarise the last run only")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--survivors", type=int, default=0, help="show this many diffs")
    args = parser.parse_args()
    if importlib.util.find_spec("mutmut") is None:
        print('mutmut is not installed: pip install -e ".[test,mutation]"', file=sys.stderr)
        return 2
    if not args.summary:
        run_mutmut("run", "--max-children", str(args.max_children))
    table, survivors = summarise(results())
    print(table)
    print(f"\n{len(survivors)} survivors:")
    for name in survivors:
        print(f"- {name}")
    for entry in survivors[: args.survivors]:
        print(run_mutmut("show", entry.split(" ")[0], capture=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

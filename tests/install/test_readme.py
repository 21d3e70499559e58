"""The README's promises that code can check."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from minibroker.handlers import HANDLERS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_api_table_matches_the_registry_that_answers_api_versions() -> None:
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)\u2013(\d+) \|$", README, flags=re.MULTILINE)
    documented = {int(key): (name, int(low), int(high)) for name, key, low, high in rows}
    served = {h.api_key: (h.name, h.advertised_min, h.max_version) for h in HANDLERS.values()}
    assert documented == served


def test_ci_runs_the_test_command_the_readme_gives() -> None:
    blocks = re.findall(r"```sh\n(.*?)\n```", README, flags=re.DOTALL)
    assert len(blocks) >= 2, "README gives a broker command and a test command"
    test_command = blocks[1].strip()
    ci_script = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci_script.splitlines()


def test_the_broker_command_module_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "minibroker", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "--port" in result.stdout


def test_every_limit_setting_is_in_the_readme_limits_table() -> None:
    import dataclasses

    from minibroker.config import BrokerConfig

    section = README.split("### Limits and bad input", 1)[1].split("\n### ", 1)[0]
    documented = set(re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE))
    limits = {
        f.name
        for f in dataclasses.fields(BrokerConfig)
        if f.name.startswith(("max_", "queued_", "fetch_max", "partial_", "connections_"))
        or f.name.endswith("retention_minutes")
    }
    assert limits <= documented, f"undocumented limits: {sorted(limits - documented)}"
    assert documented <= {f.name for f in dataclasses.fields(BrokerConfig)}

"""The promises of the README and the docs/ pages that code can check."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
import textwrap
import unicodedata
from pathlib import Path

import pytest

from minibroker.config import BrokerConfig
from minibroker.handlers import HANDLERS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
PAGES = sorted(DOCS.glob("*.md"))


def _page(name: str) -> str:
    return (DOCS / name).read_text()


def _python_blocks(text: str) -> list[str]:
    """Fenced ```python blocks, also those indented inside a list item, dedented."""
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", text, flags=re.DOTALL | re.MULTILINE)
    return [textwrap.dedent(body) for _, body in blocks]


def _slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(text: str) -> set[str]:
    text = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


def test_api_table_matches_the_registry_that_answers_api_versions() -> None:
    rows = re.findall(
        r"^\| (\w+) \| (\d+) \| (\d+)\u2013(\d+) \|$", _page("apis.md"), flags=re.MULTILINE
    )
    documented = {int(key): (name, int(low), int(high)) for name, key, low, high in rows}
    served = {h.api_key: (h.name, h.advertised_min, h.max_version) for h in HANDLERS.values()}
    assert documented == served


def test_ci_runs_the_test_command_the_readme_gives() -> None:
    blocks = re.findall(r"```sh\n(.*?)\n```", README, flags=re.DOTALL)
    assert len(blocks) >= 2, "README gives a broker command and a test command"
    test_command = blocks[1].strip()
    ci_script = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci_script.splitlines()


def test_the_getting_started_page_gives_the_readmes_commands_and_quick_start() -> None:
    """The site's first page shows what test_install runs from the README, unchanged."""
    page = _page("getting-started.md")
    readme_sh = re.findall(r"```sh\n(.*?)\n```", README, flags=re.DOTALL)[:2]
    page_sh = re.findall(r"```sh\n(.*?)\n```", page, flags=re.DOTALL)
    assert page_sh[:2] == readme_sh
    readme_python = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)[:2]
    page_python = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert page_python[:2] == readme_python


def test_the_broker_command_module_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "minibroker", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "--port" in result.stdout


def test_every_limit_setting_is_in_the_limits_page_table() -> None:
    section = _page("limits.md").split("# Limits and bad input", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE))
    limits = {
        f.name
        for f in dataclasses.fields(BrokerConfig)
        if f.name.startswith(("max_", "queued_", "fetch_max", "partial_", "connections_"))
        or f.name.endswith("retention_minutes")
    }
    assert limits <= documented, f"undocumented limits: {sorted(limits - documented)}"
    assert documented <= {f.name for f in dataclasses.fields(BrokerConfig)}


def test_every_setting_has_a_row_in_the_settings_page() -> None:
    section = _page("settings.md").split("## Every setting", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert len(documented) == len(set(documented)), "a setting listed twice"
    fields = {f.name for f in dataclasses.fields(BrokerConfig)}
    assert fields <= set(documented), f"undocumented settings: {sorted(fields - set(documented))}"
    assert set(documented) <= fields, f"not settings: {sorted(set(documented) - fields)}"


@pytest.mark.parametrize("path", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_python_examples_are_valid_python(path: Path) -> None:
    for block in _python_blocks(path.read_text()):
        ast.parse(block)


def test_the_readmes_links_lead_to_files_and_headings_that_exist() -> None:
    """The README is read on GitHub, outside the site's strict build: check its links."""
    for target in re.findall(r"\]\(([^)\s]+)\)", README):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (ROOT / path).resolve()
        assert file.exists(), f"README links to {target}, which does not exist"
        if anchor:
            assert anchor in _anchors(file.read_text()), f"README links to {target}: no heading"


def test_every_docs_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r"^\s*- (?:[^:\n]+: )?([\w-]+\.md)$", nav, flags=re.MULTILINE))
    assert {p.name for p in PAGES} == listed

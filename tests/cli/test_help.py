"""`minibroker --help` is a page: the commands, each with its line, and the common options;
every setting's flag is behind `minibroker serve --help` and `--help-all`."""

from __future__ import annotations

import dataclasses

import pytest

from minibroker.cli import main
from minibroker.commands import COMMANDS
from minibroker.config import BrokerConfig


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    try:
        code = main(list(argv))
    except SystemExit as exit:
        code = exit.code
    assert code == 0
    return capsys.readouterr().out


def _every_flag() -> list[str]:
    return [
        "--partitions" if f.name == "num_partitions" else "--" + f.name.replace("_", "-")
        for f in dataclasses.fields(BrokerConfig)
        if f.metadata.get("flag", True)
    ]


def test_the_top_level_help_lists_each_command_in_a_line_and_the_common_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help(capsys, "--help")
    assert len(text.splitlines()) < 60
    listed = text.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split()[0] for line in listed] == ["serve", "proxy", "schema-registry", *COMMANDS]
    for line in listed:
        assert len(line.split()) > 2, f"no description: {line!r}"
    for common in ("--port", "--host", "--topic", "--config", "--data-dir", "--help-all"):
        assert common in text
    assert "--group-min-session-timeout-ms" not in text
    assert "minibroker serve --help" in text
    assert _help(capsys, "-h") == text


@pytest.mark.parametrize("argv", [["serve", "--help"], ["--help-all"], ["serve", "-h"]])
def test_every_flag_is_behind_serve_help_and_help_all(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    text = _help(capsys, *argv)
    missing = [flag for flag in [*_every_flag(), "--fault", "--record-file"] if flag not in text]
    assert missing == []

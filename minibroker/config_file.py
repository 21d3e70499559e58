"""`minibroker serve --config FILE`: broker settings and topics from a TOML file.

Top-level keys are `BrokerConfig` field names, read generically from the dataclass so a
setting added there is accepted here unchanged; each value must have its field's type
and passes the same check as its command-line flag (a mapping, which has no flag, is a
TOML table). `[[topic]]` tables (name,
partitions, configs) are topics created at start; `brokers` is the number of nodes
served (the `--brokers` flag):

    port = 9092
    brokers = 3
    auto_create_topics = false
    group_initial_rebalance_delay_ms = 0

    [[topic]]
    name = "orders"
    partitions = 3
    configs = { "retention.ms" = "86400000" }
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from minibroker.config import BrokerConfig, check_settings
from minibroker.state.topic_errors import TopicError
from minibroker.state.topics import validate_topic_name

# A topic to create at start: name, partitions (None: the broker's default), configs.
StartTopic = tuple[str, int | None, dict[str, str]]

_TOPIC_KEYS = ("name", "partitions", "configs")


class ServeFile(NamedTuple):
    settings: dict[str, Any]  # BrokerConfig fields
    topics: list[StartTopic]
    brokers: int | None  # nodes to serve; None: not in the file


def load(path: Path, checks: Mapping[str, Callable[[str], Any]]) -> ServeFile:
    """The file's settings, topics and number of nodes. `checks` maps a field name (and
    `brokers`) to its flag's parser (which raises ValueError or
    argparse.ArgumentTypeError). Raises ValueError naming the key at fault."""
    try:
        with path.open("rb") as stream:
            document = tomllib.load(stream)
    except OSError as exc:
        raise ValueError(exc.strerror or str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not TOML: {exc}") from None
    topics = _topics(document.pop("topic", []))
    brokers = document.pop("brokers", None)
    if brokers is not None:
        brokers = _value("brokers", "int", brokers, checks.get("brokers"))
    check_settings(document)  # unknown keys, with the nearest real name
    kinds = {f.name: str(f.type) for f in dataclasses.fields(BrokerConfig)}
    settings = {
        name: _value(name, kinds[name], value, checks.get(name)) for name, value in document.items()
    }
    return ServeFile(settings, topics, brokers)


def _value(name: str, kind: str, value: Any, check: Callable[[str], Any] | None) -> Any:
    base = kind.removesuffix(" | None")
    if base.startswith(("Mapping[", "dict[")):  # a setting the command line has no flag for
        if not isinstance(value, dict):
            raise ValueError(f"{name} = {value!r}: expected a table")
        return value
    expected = {"bool": "true or false", "int": "an integer", "float": "a number"}.get(
        base, "a string"
    )
    if base == "bool":
        ok = isinstance(value, bool)
    elif base == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif base == "float":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise ValueError(f"{name} = {value!r}: expected {expected}")
    if check is None or isinstance(value, bool | str):
        return float(value) if base == "float" else value
    try:
        return check(str(value))
    except Exception as exc:  # the flag's own complaint (ArgumentTypeError or ValueError)
        raise ValueError(f"{name} = {value!r}: {exc}") from None


def _topics(tables: Any) -> list[StartTopic]:
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ValueError("topic: write each topic as a [[topic]] table")
    topics = []
    for table in tables:
        unknown = sorted(set(table) - set(_TOPIC_KEYS))
        if unknown:
            raise ValueError(
                f"[[topic]] {unknown[0]!r} is not a topic key (use {', '.join(_TOPIC_KEYS)})"
            )
        name = table.get("name")
        if not isinstance(name, str):
            raise ValueError("[[topic]] needs a name (a string)")
        try:
            validate_topic_name(name)
        except TopicError as exc:
            raise ValueError(f"[[topic]] {exc}") from None
        partitions = table.get("partitions")
        if partitions is not None and (
            isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1
        ):
            raise ValueError(f"[[topic]] {name!r}: partitions must be a whole number >= 1")
        configs = table.get("configs", {})
        if not isinstance(configs, dict):
            raise ValueError(f"[[topic]] {name!r}: configs must be a table")
        topics.append((name, partitions, {str(k): _config_text(v) for k, v in configs.items()}))
    return topics


def _config_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)

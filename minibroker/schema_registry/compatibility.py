"""Compatibility levels: which previous versions a new schema is checked against, and how.

Rules (Confluent Schema Registry's, sans-IO):
- BACKWARD: the new schema reads data written with the latest version.
- FORWARD: the latest version reads data written with the new schema.
- FULL: both.
- *_TRANSITIVE: the same against every live version, newest first; the first version that
  fails is the one reported.
- NONE: nothing is checked.
- A previous version of another schema type is "Incompatible because of different schema type".

Messages are those of a verbose answer: each incompatibility, where `%s` in a description
becomes "new" for the new schema and "old" for the previous one; then `{oldSchemaVersion: N}`
and `{oldSchema: '...'}` (the previous version's stored text, cut at 10 KiB); then
`{validateFields: 'false', compatibility: 'LEVEL'}`. Under FULL the forward findings come
first and the version/schema lines follow only the backward ones, as Confluent lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from minibroker.schema_registry.schemas import ParsedSchema, Problem, SchemaType

LEVELS = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)
DEFAULT_LEVEL = "BACKWARD"
DIFFERENT_SCHEMA_TYPE = "Incompatible because of different schema type"
MAX_SCHEMA_TEXT_IN_MESSAGE = 10 * 1024


def format_problem(problem: Problem, reader: str, writer: str) -> str:
    """One incompatibility as Confluent words it; `%s` are the reader then the writer."""
    description = problem.description.replace("%s", reader, 1).replace("%s", writer, 1)
    if problem.additional_info:
        return (
            f"{{errorType:'{problem.error_type}', description:'{description}', "
            f"additionalInfo:'{problem.additional_info}'}}"
        )
    return f"{{errorType:'{problem.error_type}', description:'{description}'}}"


def _formatter(kind: SchemaType) -> Callable[[Problem, str, str], str]:
    # A schema type may word its findings its own way (JSON Schema does).
    custom = getattr(kind, "format_problem", None)
    return custom if callable(custom) else format_problem


def _messages(
    kind: SchemaType,
    reader: ParsedSchema,
    writer: ParsedSchema,
    reader_label: str,
    writer_label: str,
) -> list[str]:
    fmt = _formatter(kind)
    return [fmt(p, reader_label, writer_label) for p in kind.reader_errors(reader, writer)]


def _previous_lines(version: int, previous: ParsedSchema) -> list[str]:
    text = previous.canonical()
    if len(text) <= MAX_SCHEMA_TEXT_IN_MESSAGE:
        shown = f"{{oldSchema: '{text}'}}"
    else:
        shown = f"{{oldSchema: <truncated> '{text[:MAX_SCHEMA_TEXT_IN_MESSAGE]}...'}}"
    return [f"{{oldSchemaVersion: {version}}}", shown]


def _against(
    level: str, kind: SchemaType, new: ParsedSchema, version: int, old: ParsedSchema
) -> list[str]:
    if new.schema_type != old.schema_type:
        return [DIFFERENT_SCHEMA_TYPE]
    direction = level.removesuffix("_TRANSITIVE")
    out: list[str] = []
    if direction in ("FORWARD", "FULL"):
        out.extend(_messages(kind, old, new, "old", "new"))
        if direction == "FORWARD" and out:
            out.extend(_previous_lines(version, old))
    if direction in ("BACKWARD", "FULL"):
        backward = _messages(kind, new, old, "new", "old")
        if backward:
            out.extend(backward)
            out.extend(_previous_lines(version, old))
    return out


def check(
    level: str,
    kind: SchemaType,
    new: ParsedSchema,
    previous: Sequence[tuple[int, ParsedSchema]],
) -> list[str]:
    """Confluent's verbose messages for `new` under `level` ([]: compatible).

    `previous`: the subject's live versions as (version, schema), oldest first."""
    level = level.upper()
    if level not in LEVELS:
        raise ValueError(f"Invalid compatibility level {level}")
    if level == "NONE" or not previous:
        return []
    candidates = list(reversed(previous))
    if not level.endswith("_TRANSITIVE"):
        candidates = candidates[:1]
    for version, old in candidates:
        messages = _against(level, kind, new, version, old)
        if messages:
            return [*messages, f"{{validateFields: 'false', compatibility: '{level}'}}"]
    return []

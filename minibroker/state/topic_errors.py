"""Errors of topic operations: Kafka's codes with the message a client is told."""

from __future__ import annotations

# Error codes (Kafka's Errors.java) raised from this module.
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3
POLICY_VIOLATION = 44


SHOWN_NAME_CHARS = 100


def quoted(text: str) -> str:
    """A client-given name as an error message quotes it: cut short, because a legacy
    (non-flexible) response string holds at most 32,767 bytes."""
    if len(text) > SHOWN_NAME_CHARS:
        text = text[:SHOWN_NAME_CHARS] + "..."
    return repr(text)


MAX_MESSAGE_CHARS = 1_000


class TopicError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        # Messages quote what clients sent (config values too), and a legacy response
        # string holds at most 32,767 bytes: a longer message could not be answered.
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[:MAX_MESSAGE_CHARS] + "..."
        super().__init__(message)
        self.error_code = error_code
        self.message = message

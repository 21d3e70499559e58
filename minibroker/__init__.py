"""minibroker: a Kafka-protocol broker you can import.

The names below load on first use, so `minibroker topics ...` and the other tools start
without loading the broker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minibroker.broker import Broker
    from minibroker.cluster import Cluster
    from minibroker.config import BrokerConfig
    from minibroker.faults import Fault, Faults
    from minibroker.state.topic_errors import TopicError

__all__ = ["Broker", "BrokerConfig", "Cluster", "Fault", "Faults", "TopicError"]
__version__ = "0.1.0"

_HOMES = {
    "Broker": "minibroker.broker",
    "Cluster": "minibroker.cluster",
    "BrokerConfig": "minibroker.config",
    "Fault": "minibroker.faults",
    "Faults": "minibroker.faults",
    "TopicError": "minibroker.state.topics",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'minibroker' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])

"""The public `Broker`: the one-node case of `Cluster`.

async with Broker() as broker:          # runs on the current event loop
    ...
with Broker() as broker:                # runs its own loop in a background thread
    ...
"""

from __future__ import annotations

from typing import Any

from minibroker.cluster import Cluster
from minibroker.config import BrokerConfig
from minibroker.state.clock import Clock


class Broker(Cluster):
    """A single Kafka broker speaking the wire protocol on `host:port` (0 picks a port)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(1, host, [port], config=config, clock=clock, port=port, **settings)

    @property
    def node_id(self) -> int:
        return self.nodes[0].node_id

    @property
    def host(self) -> str:
        return self.nodes[0].advertised_host

    @property
    def port(self) -> int:
        return self.nodes[0].port

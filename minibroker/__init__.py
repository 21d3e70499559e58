"""minibroker: a Kafka-protocol broker you can import."""

from minibroker.broker import Broker
from minibroker.cluster import Cluster
from minibroker.config import BrokerConfig
from minibroker.state.topics import TopicError

__all__ = ["Broker", "BrokerConfig", "Cluster", "TopicError"]
__version__ = "0.1.0"

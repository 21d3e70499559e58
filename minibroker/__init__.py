"""minibroker: a Kafka-protocol broker you can import."""

from minibroker.broker import Broker
from minibroker.cluster import Cluster
from minibroker.config import BrokerConfig
from minibroker.faults import Fault, Faults
from minibroker.state.topics import TopicError

__all__ = ["Broker", "BrokerConfig", "Cluster", "Fault", "Faults", "TopicError"]
__version__ = "0.1.0"

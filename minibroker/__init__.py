"""minibroker: a Kafka-protocol broker you can import."""

from minibroker.broker import Broker
from minibroker.config import BrokerConfig
from minibroker.state.topics import TopicError

__all__ = ["Broker", "BrokerConfig", "TopicError"]
__version__ = "0.1.0"

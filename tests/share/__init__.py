"""Share groups (KIP-932): queues on Kafka topics."""

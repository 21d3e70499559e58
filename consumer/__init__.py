"""A consumer library on aiokafka (see the README)."""

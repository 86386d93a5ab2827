"""A small blocking Kafka-protocol client (kio codecs) for floodmark's CLI, tests and tools."""

from floodmark.client.connection import KafkaConnection, RequestFailed

__all__ = ["KafkaConnection", "RequestFailed"]

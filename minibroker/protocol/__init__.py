"""Sans-IO Kafka protocol: frames, headers, message bodies, record batches.

Nothing in this package imports asyncio or touches a socket.
"""

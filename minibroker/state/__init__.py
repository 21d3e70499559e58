"""Plain synchronous broker state with an injected clock. No asyncio, no sockets."""

"""The transports: stdio, WebSocket and Streamable HTTP, each producing a :class:`MessageBus`.

Everything public is re-exported from :mod:`trio_mcp`.
"""

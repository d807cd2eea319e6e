"""The transports: stdio and WebSocket, each producing a :class:`MessageBus`.

Everything public is re-exported from :mod:`trio_mcp`.
"""

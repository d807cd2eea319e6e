"""The transport-agnostic half of trio-mcp: messages, router, tasks.

Nothing here knows which transport it runs on; everything public is
re-exported from :mod:`trio_mcp`.
"""

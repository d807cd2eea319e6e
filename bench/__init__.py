"""Benchmarks of trio-mcp against the official MCP SDKs: ``python -m bench``.

See ``bench/README.md``. Nothing here is imported by the ``trio_mcp`` package.
"""

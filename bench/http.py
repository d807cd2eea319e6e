"""``python -m bench.http``: the Streamable HTTP server-only benchmark (see ``bench/http_bench.py``).

This file's name is also the standard library's ``http`` package's. A script run as
``python bench/SCRIPT.py`` (or one that puts ``bench/`` on ``sys.path``, as
``bench/peers/mcp_server.py`` and ``mcp_client.py`` do) would find this file for
``import http`` (``import httpx``, ``import uvicorn``, ``urllib.request`` ...): then it
loads the standard library's package in its place, so nothing else changes.
"""

if __name__ == "http":  # imported as the top-level `http`: be the standard library's
    import importlib.machinery
    import importlib.util
    import sys
    import sysconfig

    _spec = importlib.machinery.PathFinder.find_spec("http", [sysconfig.get_paths()["stdlib"]])
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["http"] = _module
    _spec.loader.exec_module(_module)
elif __name__ == "__main__":
    import sys

    from bench.http_bench import main

    sys.exit(main())

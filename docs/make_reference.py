"""Write the API reference pages (``docs/reference/*.md``) from ``trio_mcp.__all__``.

Run it after adding a public name: ``python docs/make_reference.py``. Each name
lands on the page of its kind (by the module that defines it); the pages'
intros are kept here. ``tests/test_docs.py`` fails when a public name has no
entry.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import trio_mcp

OUT = Path(__file__).resolve().parent / "reference"
#: Classes whose API is mostly inherited from private mixins (the features of a peer).
INHERITING = {"App", "Peer", "RequestContext"}
#: Public type aliases (a ``Literal`` is callable-looking but no function), and their page.
TYPE_ALIASES = {"HttpServerName": "transports"}
#: Public subpackages with an ``__all__`` of their own, and their page.
SUBPACKAGES = {"trio_mcp.auth": "security"}

PAGES: dict[str, tuple[str, str]] = {
    "core": ("Apps, peers and requests", (
        "What one side offers ({py:class}`~trio_mcp.App`), one connection in either role "
        "({py:class}`~trio_mcp.Peer`), and what a handler sees of its request "
        "({py:class}`~trio_mcp.RequestContext`).")),
    "transports": ("Transports", (
        "Clients (`open_*`), servers (`serve_*`, started with `nursery.start`) and the "
        "low-level tier (`wrap_*`, a {py:class}`~trio_mcp.MessageBus` for your own "
        "transport).")),
    "tasks": ("Tasks", (
        "Following a task ({py:class}`~trio_mcp.TaskHandle`), hosting them "
        "({py:class}`~trio_mcp.TaskRegistry`, {py:class}`~trio_mcp.TaskLimits`), where "
        "they live (the stores) and the status machine.")),
    "messages": ("Messages", (
        "The MCP types a program reads and writes (attrs classes: change a copy with "
        "{py:func}`attrs.evolve`; the wire's camelCase names are snake_case here) and the "
        "JSON-RPC envelopes.")),
    "errors": ("Errors and codes", (
        "What callers catch, what handlers raise, and the JSON-RPC codes. Connection "
        "failures on every transport are {py:class}`~trio_mcp.ConnectionFailed`.")),
    "security": ("Security and authorization", (
        "Names for authenticating requests and checking what they may do.")),
    "observability": ("Tracing and metrics", (
        "OpenTelemetry support (the `otel` extra).")),
}


def page_of(name: str, obj: object) -> str:
    if name in TYPE_ALIASES:
        return TYPE_ALIASES[name]
    module = getattr(obj, "__module__", "") if inspect.isclass(obj) or callable(obj) else ""
    module = module or ""
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return "errors"
    if not (inspect.isclass(obj) or callable(obj)):
        return "errors" if name.isupper() and not name.endswith(("META", "VERSION")) else "messages"
    if "_telemetry" in module or "otel" in module or "tracing" in name:
        return "observability"
    if ".auth" in module or "_auth" in module or "_scopes" in module:
        return "security"
    if name.startswith("Task") or "_tasks" in module or name in (
            "next_status", "open_task_store") or name.endswith("TaskStore"):
        return "tasks"
    if "_messages" in module:
        return "messages"
    if "transports" in module or "_session" in module:
        return "transports"
    return "core"


def directive(name: str, obj: object, module: str = "trio_mcp") -> str:
    if name in TYPE_ALIASES:
        return f".. autodata:: {module}.{name}\n"
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        kind = "autoexception"
    elif inspect.isclass(obj):
        if name in INHERITING:
            return f".. autoclass:: {module}.{name}\n   :inherited-members:\n"
        kind = "autoclass"
    elif callable(obj):
        kind = "autofunction"
    else:
        return f".. autodata:: {module}.{name}\n   :no-value:\n"
    return f".. {kind}:: {module}.{name}\n"


def main() -> None:
    entries: dict[str, list[str]] = {page: [] for page in PAGES}
    for name in trio_mcp.__all__:
        obj = getattr(trio_mcp, name)
        entries[page_of(name, obj)].append(directive(name, obj))
    for module_name, page in SUBPACKAGES.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # an optional part that is not there
            continue
        entries[page].append(f".. automodule:: {module_name}\n   :no-members:\n")
        for name in getattr(module, "__all__", ()):
            entries[page].append(directive(name, getattr(module, name), module_name))
    index = ["# API reference\n", "Every public name of `trio_mcp` (its `__all__`), from the "
             "docstrings. Import them from `trio_mcp`; the modules they are defined in are "
             "private.\n", "```{toctree}\n:maxdepth: 1\n", "overview"]
    for page, (title, intro) in PAGES.items():
        target = OUT / f"{page}.md"
        if not entries[page]:
            target.unlink(missing_ok=True)
            continue
        index.append(page)
        body = [f"# {title}\n", f"{intro}\n", "```{eval-rst}\n.. currentmodule:: trio_mcp\n",
                *entries[page], "```\n"]
        target.write_text("\n".join(body))
    index.append("```\n")
    (OUT / "index.md").write_text("\n".join(index))


if __name__ == "__main__":
    main()

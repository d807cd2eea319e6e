"""Write ``trio.inv``, a Sphinx inventory of trio's documented names, from trio's doc sources.

The build machines reach PyPI but not trio.readthedocs.io, so intersphinx cannot download
trio's ``objects.inv``. trio's sdist ships its documentation sources; this reads their
``module``/``currentmodule``/``auto*`` directives and writes the names with the page and
anchor they have on https://trio.readthedocs.io/en/stable/ (Sphinx's own anchor rule: the
full dotted name). Usage::

    pip download --no-deps --no-binary :all: trio==0.35.0 && tar xzf trio-0.35.0.tar.gz
    python docs/_intersphinx/trio_inventory.py trio-0.35.0/docs/source docs/_intersphinx/trio.inv
"""

import importlib
import re
import sys
import zlib
from pathlib import Path

ROLES = {
    "autofunction": "function", "function": "function", "autoclass": "class", "class": "class",
    "autoexception": "exception", "exception": "exception", "attribute": "attribute",
    "method": "method", "automethod": "method",
}
DIRECTIVE = re.compile(r"^\s*\.\. (\w+):: ([\w.]+)")


def _members(dotted: str) -> list[str]:
    """The public methods of the installed trio class ``dotted`` (none if it is not one)."""
    module_name, _, name = dotted.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        return []
    if not isinstance(cls, type):
        return []
    return [m for m, v in vars(cls).items() if not m.startswith("_") and callable(v)]


def main(source: str, out: str) -> None:
    lines = []
    for page in sorted(Path(source).glob("*.rst")):
        module = "trio"
        for line in page.read_text().splitlines():
            match = DIRECTIVE.match(line)
            if not match:
                continue
            kind, name = match.groups()
            if kind in ("module", "currentmodule"):
                module = name
                lines.append(f"{name} py:module 0 {page.stem}.html#module-{name} -")
            elif kind in ROLES:
                full = name if name.startswith("trio") else f"{module}.{name}"
                lines.append(f"{full} py:{ROLES[kind]} 1 {page.stem}.html#{full} -")
                if kind == "autoclass":  # ":members:": the installed class's public methods
                    for member in _members(full):
                        target = f"{full}.{member}"
                        lines.append(f"{target} py:method 1 {page.stem}.html#{target} -")
    header = (
        "# Sphinx inventory version 2\n# Project: Trio\n# Version: 0.35.0\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    body = zlib.compress("\n".join(dict.fromkeys(lines)).encode() + b"\n")
    Path(out).write_bytes(header.encode() + body)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

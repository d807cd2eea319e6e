"""Sphinx configuration of the trio-mcp documentation.

Build: ``pip install -e '.[docs]'`` then
``sphinx-build -W --keep-going -b html docs docs/_build/html`` (or ``make -C docs html``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's trio_mcp, installed or not

import trio_mcp  # noqa: E402

project = "trio-mcp"
author = "the trio-mcp authors"
copyright = "2026, the trio-mcp authors"
release = trio_mcp.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_intersphinx", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Google-style docstrings (the project's style) through napoleon.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # "Attributes:" as fields: autodoc documents the attributes themselves
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_inherit_docstrings = True
autoclass_content = "class"

# Broken references fail the build (-W) when they name trio-mcp's public API: a link to
# trio_mcp.X or trio_mcp.auth.X that does not resolve is an error. Names in private modules
# (docstrings may name them), type variables and other projects' names without an
# inventory (httpx) are left as plain text.
nitpicky = True
# Annotations such as ``type[R]`` make Sphinx look up "type" and find several message
# attributes named ``type``: an ambiguity in generated signatures, not a broken link.
suppress_warnings = ["ref.python"]
nitpick_ignore_regex = [
    (r"py:.*", r"(?!trio_mcp\.).*"),
    (r"py:.*", r"trio_mcp\.(.*\.)?_.*"),
    (r"py:.*", r"trio_mcp\.peer\..*"),
]

# Intersphinx: the build machines reach PyPI and Debian but not the projects' doc sites,
# so the inventories are shipped in _intersphinx/ (see its README.md); the URLs are the
# published sites the links point to. httpx documents itself with MkDocs: it has no Sphinx
# inventory, so httpx names stay plain text.
intersphinx_mapping = {
    "python": ("https://docs.python.org/3", str(HERE / "_intersphinx" / "python.inv")),
    "trio": ("https://trio.readthedocs.io/en/stable", str(HERE / "_intersphinx" / "trio.inv")),
    "attrs": ("https://www.attrs.org/en/stable", str(HERE / "_intersphinx" / "attrs.inv")),
}
intersphinx_timeout = 5

html_theme = "alabaster"
html_title = f"trio-mcp {release}"
html_static_path: list[str] = []
html_theme_options = {"description": "MCP peers with tasks, on Trio", "fixed_sidebar": True}

"""Python signatures to MCP schemas: the machinery under tools, prompts and resources.

Type hints become JSON Schemas (2020-12) (:mod:`._hints`, :mod:`._schema`),
arguments are structured into the annotated types by a strict converter
(:mod:`._arguments`) and return values serialized to JSON (:mod:`._serialize`);
:mod:`._toolsig` analyzes a tool's signature, :mod:`._toolspec` makes the
tool's spec, and :mod:`._signature` reads the parameters of App functions
(resources, templates, prompts, completers).

It is not an MCP feature: the features above import it, it imports only
:mod:`trio_mcp.peer._messages` below it. The context parameter's type is
passed in by the caller (``context_type``), so nothing here knows
:class:`~trio_mcp.peer._features.RequestContext`.
"""

"""The ``resources`` and ``prompts`` commands of ``trio-mcp``.

``resources list [--templates]``, ``resources read URI [--out FILE]``,
``prompts list`` and ``prompts get NAME [--args JSON]``: each connects like
``call`` (``--stdio``, ``--ws`` or ``--http``), prints what it got on stdout
(``--json``: the raw result) and returns the exit status.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio

from ..peer import Peer
from ..peer._messages import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    Prompt,
    ReadResourceResult,
    ResourceLink,
    TextContent,
    TextResourceContents,
    to_wire,
)
from ._connect import EXIT_OK, CliError, StatusView, client_app, connect, parse_json_object

#: What a command does once connected: its output (lines, or JSON with ``--json``).
Action = Callable[[Peer], Awaitable[list[str]]]


def _run(args: argparse.Namespace, feature: str, action: Action) -> int:
    """Connect, check the server offers ``feature``, run ``action``, print its lines."""
    with StatusView(args.quiet) as view:
        lines = trio.run(partial(_connected, args, view, feature, action))
    for line in lines:
        print(line)
    return EXIT_OK


async def _connected(
    args: argparse.Namespace, view: StatusView, feature: str, action: Action
) -> list[str]:
    async with connect(args, client_app(args, view)) as peer:
        caps = peer.remote_server_capabilities
        if caps is None or getattr(caps, feature) is None:
            raise CliError(f"the server does not offer {feature} (it did not declare them)")
        view.update(f"{feature}/{args.action}")
        with trio.move_on_after(args.timeout if args.timeout is not None else float("inf")):
            return await action(peer)
    raise CliError(f"no answer to {feature}/{args.action} within --timeout {args.timeout:g} s")


def _as_json(value: Any) -> list[str]:
    return [json.dumps(value, indent=2, ensure_ascii=False)]


def _columns(*cells: str | None) -> str:
    return "  ".join(cell for cell in cells if cell)


# --- resources ---------------------------------------------------------------------------------


def run_resources(args: argparse.Namespace) -> int:
    """``trio-mcp resources list|read``."""
    if args.action == "list":
        return _run(args, "resources", partial(_list_resources, args))
    if args.out is not None and args.json:
        raise CliError("--out and --json do not go together")
    return _run(args, "resources", partial(_read_resource, args))


async def _list_resources(args: argparse.Namespace, peer: Peer) -> list[str]:
    if args.templates:
        templates = await peer.list_all_resource_templates()
        if args.json:
            return _as_json({"resourceTemplates": [to_wire(t) for t in templates]})
        return [_columns(t.uri_template, t.name, t.mime_type) for t in templates]
    resources = await peer.list_all_resources()
    if args.json:
        return _as_json({"resources": [to_wire(r) for r in resources]})
    return [_columns(r.uri, r.name, r.mime_type) for r in resources]


async def _read_resource(args: argparse.Namespace, peer: Peer) -> list[str]:
    result = await peer.read_resource(args.uri)
    if args.json:
        return _as_json(to_wire(result))
    if args.out is not None:
        return _save_contents(result, Path(args.out))
    lines = []
    for contents in result.contents:
        if isinstance(contents, TextResourceContents):
            lines.append(contents.text)
        elif isinstance(contents, BlobResourceContents):
            size = len(_decoded(contents))
            lines.append(f"<blob {contents.uri}: {size} bytes"
                         + (f", {contents.mime_type}" if contents.mime_type else "")
                         + "; --out FILE saves it>")
        else:  # pragma: no cover - the converter only makes those two
            lines.append(json.dumps(to_wire(contents), ensure_ascii=False))
    return lines


def _decoded(contents: BlobResourceContents) -> bytes:
    try:
        return base64.b64decode(contents.blob, validate=True)
    except binascii.Error as exc:
        raise CliError(f"the blob of {contents.uri} is not base64: {exc}") from None


def _save_contents(result: ReadResourceResult, out: Path) -> list[str]:
    """``--out FILE``: the decoded bytes (text as UTF-8), all contents in order."""
    data = b"".join(
        _decoded(c) if isinstance(c, BlobResourceContents)
        else c.text.encode() if isinstance(c, TextResourceContents) else b""
        for c in result.contents
    )
    try:
        out.write_bytes(data)
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(f"wrote {len(data)} bytes to {out}", file=sys.stderr)
    return []


# --- prompts -----------------------------------------------------------------------------------


def run_prompts(args: argparse.Namespace) -> int:
    """``trio-mcp prompts list|get``."""
    if args.action == "list":
        return _run(args, "prompts", partial(_list_prompts, args))
    arguments = parse_json_object(args.args, "--args")
    not_text = sorted(k for k, v in arguments.items() if not isinstance(v, str))
    if not_text:
        raise CliError(f"--args: prompt arguments are strings; not {', '.join(not_text)}")
    return _run(args, "prompts", partial(_get_prompt, args, arguments))


def _signature(prompt: Prompt) -> str:
    names = [arg.name + ("" if arg.required else "?") for arg in prompt.arguments or []]
    return f"{prompt.name}({', '.join(names)})"


async def _list_prompts(args: argparse.Namespace, peer: Peer) -> list[str]:
    prompts = await peer.list_all_prompts()
    if args.json:
        return _as_json({"prompts": [to_wire(p) for p in prompts]})
    return [_columns(_signature(p), p.title or p.description) for p in prompts]


async def _get_prompt(
    args: argparse.Namespace, arguments: dict[str, str], peer: Peer
) -> list[str]:
    result = await peer.get_prompt(args.name, arguments)
    if args.json:
        return _as_json(to_wire(result))
    return _prompt_lines(result)


def _prompt_lines(result: GetPromptResult) -> list[str]:
    lines = [f"# {result.description}"] if result.description else []
    for message in result.messages:
        lines.append(f"{message.role}: {_describe(message.content)}")
    return lines


def _describe(block: Any) -> str:
    """A content block in one line: its text, else what it is."""
    match block:
        case TextContent(text=text):
            return text
        case ImageContent() | AudioContent():
            return f"[{block.type} {block.mime_type}]"
        case EmbeddedResource(resource=resource):
            embedded = resource.get("text")
            return f"[resource {resource.get('uri')}]" + (f" {embedded}" if embedded else "")
        case ResourceLink(uri=uri):
            return f"[resource link {uri}]"
    return json.dumps(to_wire(block), ensure_ascii=False)

"""Terminal I/O shared by the ``trio-mcp`` command and its demo.

Prompts are written to stderr and read from stdin, one at a time (a lock
serializes them, so two concurrent requests never interleave their
questions). Whatever live display is running is paused while a prompt is
open. :mod:`rich` is optional: :func:`rich_console` returns ``None`` when it
is not installed or the stream is not a terminal, and callers fall back to
plain lines.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Final, TextIO, final

import trio

from .._errors import McpError
from ..peer._messages import CreateMessageParams, CreateMessageResult, ElicitParams, ElicitResult

if TYPE_CHECKING:
    from rich.console import Console

#: The JSON-RPC code MCP suggests when the user rejects a sampling request.
USER_REJECTED: Final = -1
ELICIT_ACTIONS: Final = ("accept", "decline", "cancel")


def rich_console(stream: TextIO) -> Console | None:
    """A rich console writing to ``stream``, or ``None`` for plain output.

    Plain output is used when ``stream`` is not a terminal or :mod:`rich`
    is not installed (``pip install 'trio-mcp[cli]'`` adds it).
    """
    if not stream.isatty():
        return None
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=stream)


@final
class Terminal:
    """Asks the user questions on stderr and reads the answers from stdin.

    Args:
        pause: Returns a context manager that hides the live display while
            a prompt is open (nothing is paused by default).
    """

    def __init__(self, pause: Callable[[], AbstractContextManager[Any]] | None = None) -> None:
        self.pause = pause or nullcontext
        self._lock = trio.Lock()

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[None]:
        # One conversation at a time, with the live display hidden throughout.
        async with self._lock:
            with self.pause():
                yield

    async def ask(self, question: str) -> str | None:
        """Print ``question`` on stderr and return the next line of stdin.

        Returns:
            The line without its newline, or ``None`` at end of input.

        Cancellation: stops waiting at once; the thread blocked reading
            stdin is abandoned and its line, if one comes, is lost.
        """
        async with self._session():
            return await self._read(question)

    @staticmethod
    def _write(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()

    async def _read(self, question: str) -> str | None:
        self._write(question)
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        return None if not line else line.rstrip("\r\n")

    # --- elicitation ----------------------------------------------------------------

    async def elicit(self, params: ElicitParams, asker: str = "The server") -> ElicitResult:
        """Ask the user to answer an ``elicitation/create`` form.

        Shows the message, asks whether to answer at all (accept, decline or
        cancel; an empty line accepts, anything else is asked again), then
        asks for each property of the requested schema in turn, converting
        the answer to the property's type (booleans take y/n). End of input
        cancels.

        Args:
            params: The request.
            asker: Who asks, as shown to the user.

        Cancellation: stops asking; nothing is answered.
        """
        async with self._session():
            return await self._elicit(params, asker)

    async def _elicit(self, params: ElicitParams, asker: str) -> ElicitResult:
        header = f"\n{asker} asks: {params.message}\n"
        if params.mode == "url":
            self._write(header + f"(to open {params.url}; this client only answers forms)\n")
            return ElicitResult(action="decline")
        question = header + "Answer it? [A]ccept / [d]ecline / [c]ancel: "
        while True:
            choice = await self._read(question)
            if choice is None:
                return ElicitResult(action="cancel")
            action = _elicit_action(choice)
            if action is not None:
                break
            question = "  answer a (accept, the default), d (decline) or c (cancel): "
        if action != "accept":
            return ElicitResult(action=action)
        schema = params.requested_schema or {}
        properties: dict[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        content: dict[str, Any] = {}
        for name, prop in properties.items():
            value = await self._ask_property(name, prop if isinstance(prop, dict) else {},
                                             name in required)
            if value is _EOF:
                return ElicitResult(action="cancel")
            if value is not _SKIP:
                content[name] = value
        return ElicitResult(action="accept", content=content)

    async def _ask_property(self, name: str, prop: dict[str, Any], required: bool) -> Any:
        kind = prop.get("type", "string")
        choices = prop.get("enum") or [
            option.get("const") for option in prop.get("oneOf") or () if isinstance(option, dict)
        ]
        label = prop.get("title") or name
        hint = {"boolean": "y/n", "integer": "integer", "number": "number"}.get(kind, "text")
        if choices:
            hint = " | ".join(str(c) for c in choices)
        if "default" in prop:
            hint += f", default {json.dumps(prop['default'])}"
        description = f" ({prop['description']})" if prop.get("description") else ""
        question = f"  {label}{description} [{hint}]{'' if required else ' (optional)'}: "
        while True:
            line = await self._read(question)
            if line is None:
                return _EOF
            text = line.strip()
            if not text:
                if "default" in prop:
                    return prop["default"]
                if not required:
                    return _SKIP
                self._write("  an answer is required\n")
                continue
            try:
                return _convert(text, kind, choices)
            except ValueError as exc:
                self._write(f"  {exc}\n")

    # --- sampling ---------------------------------------------------------------------

    async def sample(
        self, params: CreateMessageParams, asker: str = "The server"
    ) -> CreateMessageResult:
        """Show a ``sampling/createMessage`` request and read the reply from the user.

        Raises:
            McpError: -1 (user rejected) on an empty line or end of input.

        Cancellation: stops asking; nothing is answered.
        """
        lines = ["", f"{asker} asks for a model reply (sampling):"]
        if params.system_prompt:
            lines.append(f"  [system] {params.system_prompt}")
        for message in params.messages:
            blocks = message.content if isinstance(message.content, list) else [message.content]
            for block in blocks:
                kind = block.get("type")
                text = block.get("text") if kind == "text" else f"<{kind}>"
                lines.append(f"  [{message.role}] {text}")
        lines.append("Your reply (an empty line rejects the request): ")
        async with self._session():
            reply = await self._read("\n".join(lines))
        if not reply:
            raise McpError(USER_REJECTED, "User rejected sampling request")
        return CreateMessageResult(
            role="assistant", content={"type": "text", "text": reply}, model="human"
        )


def _elicit_action(choice: str) -> str | None:
    """The action a typed answer picks (an empty line accepts), or None if unclear."""
    text = choice.strip().lower()
    if not text:
        return "accept"
    matches = [action for action in ELICIT_ACTIONS if action.startswith(text)]
    return matches[0] if len(matches) == 1 else None


_EOF: Final = object()
_SKIP: Final = object()


def _convert(text: str, kind: str, choices: list[Any]) -> Any:
    value: Any
    if kind == "boolean":
        lowered = text.lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer y or n")
    if kind == "integer":
        try:
            value = int(text)
        except ValueError:
            raise ValueError("enter a whole number") from None
    elif kind == "number":
        try:
            value = float(text)
        except ValueError:
            raise ValueError("enter a number") from None
    elif kind == "array":
        value = [part.strip() for part in text.split(",") if part.strip()]
    else:
        value = text
    if choices and kind != "array" and value not in choices:
        raise ValueError("choose one of: " + ", ".join(str(c) for c in choices))
    return value


def elicit_reply(text: str) -> ElicitResult:
    """Parse an ``--elicit-reply`` value into an :class:`ElicitResult`.

    ``{"approve": true}`` accepts with that content; an object with an
    ``"action"`` of ``accept``/``decline``/``cancel`` is a whole result.

    Raises:
        ValueError: ``text`` is not a JSON object of that shape.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--elicit-reply is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("--elicit-reply must be a JSON object")
    action = data.get("action")
    if isinstance(action, str) and action in ELICIT_ACTIONS and set(data) <= {"action", "content"}:
        content = data.get("content")
        if content is not None and not isinstance(content, dict):
            raise ValueError("--elicit-reply: content must be a JSON object")
        return ElicitResult(action=action, content=content)
    return ElicitResult(action="accept", content=data)

"""A modern (2026-07-28) request's protocol fields and MRTR answers: :class:`ModernRequest`.

Read from the request's ``_meta`` (:func:`read_request_meta`) and made the
current :class:`~trio_mcp.peer._features._base.Dialect` by ``_modern.wrap``
while the request's handler runs: what the features read instead of the
connection's handshake (capabilities, log level) and ask (questions, a
task's questions).
"""

from __future__ import annotations

from typing import Any, Final, TypeVar, final

import attrs
import trio

from ..._errors import INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, McpError
from .._features._base import Asker, Question
from .._features._questions import ask_each, wire_questions
from .._messages import (
    ALL_PROTOCOL_VERSIONS,
    CAPABILITY_OF,
    LOGGING_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_PROTOCOL_VERSION,
    MODERN_PROTOCOL_VERSIONS,
    ClientCapabilities,
    Implementation,
    ListRootsResult,
    Request,
    TaskMetadata,
    converter,
    value_key,
)
from .._tasks import PulledInputs, TaskActor, TaskRecord
from ._mrtr import MAX_QUESTIONS, InputRequired, missing_capability

T = TypeVar("T")


@final
@attrs.define(eq=False)
class RoundState:
    """The answers one run of an MRTR handler may use, and what it used.

    Attributes:
        answers: Key -> answer: the verified earlier rounds', then this request's
            answers to the keys its ``requestState`` says were asked (no state:
            none; see ``_modern.usable_answers``).
        used: The answers the handler took (recorded in the next ``requestState``).
        asked: How many questions the handler asked so far (names unnamed keys).
    """

    answers: dict[str, Any]
    used: dict[str, Any] = attrs.field(factory=dict)
    asked: int = 0


@final
@attrs.define(eq=False)
class Prelude:
    """A task's work running in its request until it starts the task (``task_prelude``).

    Attributes:
        outcome: ``"started"`` (``ctx.start_task()``), ``"input_required"``
            (a question the request did not answer) or ``"done"`` (the work
            ended first); None until then.
        need: The unanswered questions, for ``"input_required"``.
    """

    outcome: str | None = None
    need: InputRequired | None = None
    settled: trio.Event = attrs.field(factory=trio.Event)

    def settle(self, outcome: str, need: InputRequired | None = None) -> None:
        """The prelude ended (the first call wins)."""
        if self.outcome is None:
            self.outcome, self.need = outcome, need
            self.settled.set()


@final
@attrs.define(eq=False)
class ModernRequest:
    """The per-request protocol fields of one modern request, current while it is handled.

    Attributes:
        method: The request's method.
        protocol_version: ``io.modelcontextprotocol/protocolVersion``.
        client_capabilities: ``io.modelcontextprotocol/clientCapabilities``.
        client_info: ``io.modelcontextprotocol/clientInfo`` (None when absent).
        log_level: ``io.modelcontextprotocol/logLevel``; ``None``: no log messages.
        round: The MRTR answers (``tools/call``, ``prompts/get``, ``resources/read``),
            set by the dialect once the request's answers are read.
        task: The task a ``tools/call`` runs as (the server decided; see
            ``_modern_tasks.prepare_call``), else ``None``.
        prelude: That task's prelude while its work runs in the request
            (``task_prelude=True`` tools; see ``_modern_tasks.run_prelude``).
    """

    method: str
    protocol_version: str
    client_capabilities: ClientCapabilities
    client_info: Implementation | None = None
    log_level: str | None = None
    round: RoundState | None = None
    task: TaskMetadata | None = None
    prelude: Prelude | None = None

    def answer(self, method: str, params: dict[str, Any], key: str | None) -> tuple[str, Any]:
        """The recorded answer to one question, as ``(key, answer)``; ``answer`` is None if new.

        Raises:
            McpError: -32021 if the client did not declare the capability the
                question needs; -32603 outside a request that may ask.
        """
        check_declared(self.client_capabilities, method, params)
        state = self.round
        if state is None:
            raise McpError(
                INVALID_PARAMS, f"Invalid params: {self.method} cannot ask the client for input"
            )
        state.asked += 1
        if state.asked > MAX_QUESTIONS:
            raise McpError(INVALID_PARAMS, "Invalid params: too many questions for one request")
        if key is None:
            key = f"{CAPABILITY_OF[method]}-{state.asked}"
        found = state.answers.get(key)
        if found is not None:
            state.used[key] = found
        return key, found

    # --- the features' Dialect (trio_mcp.peer._features._base) ------------------------

    def lets_log(self, level_rank: int) -> bool:
        """The request's own ``logLevel`` (none: no log messages)."""
        level = self.log_level
        return level is not None and level_rank >= LOGGING_LEVELS.index(level)

    def call_task(self, requested: TaskMetadata | None) -> TaskMetadata | None:
        """The server's decision (:attr:`task`; the request's ``params.task`` is not read)."""
        return self.task

    def stored_capabilities(self) -> dict[str, Any] | None:
        """Nothing: a stored 2026-07-28 request carries its own capabilities."""
        return None

    async def ask(
        self, ctx: Asker, method: str, params: dict[str, Any], result_type: type[T],
        key: str | None, *, as_task: bool = False, ttl: int | None = None,
    ) -> T:
        """One question: in a task, posted for its requestor to pull (``tasks/get``,
        answered by ``tasks/update``); else answered from the request's recorded
        answers, or the handler stops asking it (``as_task``/``ttl`` do not apply).

        Raises:
            InputRequired: (not in a task) the question has no answer yet.
            McpError: -32021 for an undeclared capability; -32602 when the
                answer does not fit ``result_type``.
        """
        task = ctx._task
        if task is not None and isinstance(task.questions, PulledInputs):
            check_declared(self.client_capabilities, method, params)
            raw, _ = await task.ask(method, params, key)
            pulled: T = structure_answer(key or method, raw, result_type)
            return pulled
        key, found = self.answer(method, params, key)
        if found is None:
            raise InputRequired({key: {"method": method, "params": params}})
        answer: T = structure_answer(key, found, result_type)
        return answer

    async def ask_many(self, ctx: Asker, questions: dict[str, Question]) -> dict[str, Any]:
        """Several questions: in a task, posted together; else all unanswered ones go
        out in one ``input_required`` round.

        Raises:
            InputRequired: (not in a task) some question has no answer yet (all of
                those are asked).
        """
        task = ctx._task
        if task is not None and isinstance(task.questions, PulledInputs):
            return await ask_each(ctx, questions)
        missing: dict[str, dict[str, Any]] = {}
        results: dict[str, Any] = {}
        for key, (method, params, result_type) in wire_questions(questions).items():
            key, found = self.answer(method, params, key)
            if found is None:
                missing[key] = {"method": method, "params": params}
            else:
                answer = structure_answer(key, found, result_type)
                results[key] = answer.roots if isinstance(answer, ListRootsResult) else answer
        if missing:
            raise InputRequired(missing)
        return results

    def task_created(self, record: TaskRecord, meta: dict[str, Any] | None) -> dict[str, Any]:
        """The tasks extension's ``CreateTaskResult``: ``resultType: "task"`` and the task."""
        out: dict[str, Any] = {
            "resultType": "task", "taskId": record.task_id, "status": record.status._value_,
            "createdAt": record.created_at, "lastUpdatedAt": record.last_updated_at,
            "ttlMs": record.ttl,
        }
        if record.poll_interval is not None:
            out["pollIntervalMs"] = record.poll_interval
        if record.status_message is not None:
            out["statusMessage"] = record.status_message
        if meta is not None:
            out["_meta"] = meta
        return out

    def start_task(self, actor: TaskActor) -> None:
        """End the prelude of the task ``actor`` runs (``ctx.start_task()``): from here its
        questions are the task's, pulled with ``tasks/get``; a no-op without a prelude."""
        if self.prelude is not None and not isinstance(actor.questions, PulledInputs):
            actor.questions = self.task_questions(actor)
            self.prelude.settle("started")

    def task_questions(self, actor: TaskActor) -> PulledInputs:
        """A task's questions in this era: shown by ``tasks/get``, answered by ``tasks/update``
        (a re-run's keys are its own: ``a<attempt>.``)."""
        pulled = PulledInputs()
        if actor.record.attempt > 1:
            pulled.key_prefix = f"a{actor.record.attempt}."
        return pulled


def declared(caps: ClientCapabilities, capability: str) -> bool:
    """Whether ``caps`` declares the client ``capability`` (``sampling``...)."""
    value = getattr(caps, capability, None)
    return value is not None or capability in caps.extra


def check_declared(caps: ClientCapabilities, method: str, params: dict[str, Any]) -> None:
    """-32021 unless ``caps`` lets the server ask ``method`` (and its elicitation mode).

    Raises:
        McpError: -32021 naming the missing capability.
    """
    capability = CAPABILITY_OF[method]
    if not declared(caps, capability):
        raise missing_capability(capability)
    modes = caps.elicitation
    mode = params.get("mode", "form")
    if method == "elicitation/create" and modes and mode not in modes:
        raise missing_capability("elicitation", {mode: {}})


def structure_answer(key: str, found: Any, result_type: type[Any]) -> Any:
    """``found`` as ``result_type``, or -32602 naming the input response."""
    try:
        return converter.structure(found, result_type)
    except Exception:
        raise McpError(
            INVALID_PARAMS,
            f"Invalid params: inputResponses[{key[:64]!r}] is not a valid "
            f"{result_type.__name__}",
        ) from None


# --- reading a request -----------------------------------------------------------------


def is_modern_shaped(req: Request) -> bool:
    """Whether ``req`` carries any of the modern per-request ``_meta`` fields."""
    params = req.params
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and (
        META_PROTOCOL_VERSION in meta or META_CLIENT_CAPABILITIES in meta
    )


def read_request_meta(req: Request) -> ModernRequest:
    """The modern protocol fields of ``req``: every reserved ``_meta`` key checked here.

    The 2026-07-28 schema (``RequestMetaObject``) types five keys of a
    request's ``_meta``: ``io.modelcontextprotocol/protocolVersion`` (a
    string, required), ``io.modelcontextprotocol/clientCapabilities`` (a
    ``ClientCapabilities`` object, required), ``io.modelcontextprotocol/
    clientInfo`` (an ``Implementation``), ``io.modelcontextprotocol/logLevel``
    (a ``LoggingLevel``) and ``progressToken`` (a string or an integer). A
    key present with a value of another type makes the request's params
    invalid; other keys are the client's own and are not looked at.

    Raises:
        McpError: -32602 for a missing required field or a reserved key of
            the wrong type (the message names the key); -32022 (with
            ``data.supported`` and ``data.requested``) for a version this
            side does not speak in this era.
    """
    params = req.params if isinstance(req.params, dict) else {}
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise McpError(
            INVALID_PARAMS,
            f"Invalid params: _meta with {META_PROTOCOL_VERSION} and "
            f"{META_CLIENT_CAPABILITIES} is required",
        )
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        raise _bad_meta(META_PROTOCOL_VERSION, "(a string) is required")
    caps = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(caps, dict):
        raise _bad_meta(META_CLIENT_CAPABILITIES, "(an object) is required")
    if version not in MODERN_PROTOCOL_VERSIONS:
        raise unsupported_version(version)
    capabilities = _capabilities(caps)
    level: str | None = None
    if META_LOG_LEVEL in meta:
        level = meta[META_LOG_LEVEL]
        if level not in LOGGING_LEVELS:
            raise McpError(
                INVALID_PARAMS, f"Invalid params: unknown log level {str(level)[:20]!r} in "
                f"_meta.{META_LOG_LEVEL} (one of {', '.join(LOGGING_LEVELS)})",
            )
    info = _client_info(meta[META_CLIENT_INFO]) if META_CLIENT_INFO in meta else None
    if META_PROGRESS_TOKEN in meta and not _progress_token(meta[META_PROGRESS_TOKEN]):
        raise _bad_meta(META_PROGRESS_TOKEN, "must be a string or an integer")
    return ModernRequest(req.method, version, capabilities, info, level)


def _bad_meta(key: str, problem: str) -> McpError:
    return McpError(INVALID_PARAMS, f"Invalid params: _meta.{key} {problem}")


def _progress_token(value: Any) -> bool:
    """Whether ``value`` is a ``ProgressToken`` (a string or an integer; JSON's 2.0 is one)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, str | int) or (isinstance(value, float) and value.is_integer())


#: ``ClientCapabilities`` members (2026-07-28): the members of each that must be
#: objects (None: every member, as in a map of extension settings).
_CAPABILITY_MEMBERS: Final[dict[str, tuple[str, ...] | None]] = {
    "elicitation": ("form", "url"),
    "sampling": ("context", "tools"),
    "roots": (),
    "experimental": None,
    "extensions": None,
}


def capabilities_problem(caps: dict[str, Any]) -> str | None:
    """What makes ``caps`` not a 2026-07-28 ``ClientCapabilities``, or None."""
    for name, inner in _CAPABILITY_MEMBERS.items():
        if name not in caps:
            continue
        value = caps[name]
        if not isinstance(value, dict):
            return f"{name} must be an object"
        for key in value if inner is None else inner:
            if key in value and not isinstance(value[key], dict):
                return f"{name}[{str(key)[:64]!r}] must be an object"
    return None


def implementation_problem(info: Any) -> str | None:
    """What makes ``info`` not an ``Implementation`` (2026-07-28), or None."""
    if not isinstance(info, dict):
        return "must be an object (an Implementation)"
    for key in ("name", "version"):
        if not isinstance(info.get(key), str):
            return f"needs {key} (a string)"
    for key in ("title", "description", "websiteUrl"):
        if key in info and not isinstance(info[key], str):
            return f"{key} must be a string"
    if "icons" not in info:
        return None
    icons = info["icons"]
    if not isinstance(icons, list):
        return "icons must be an array"
    for index, icon in enumerate(icons):
        problem = _icon_problem(icon)
        if problem is not None:
            return f"icons[{index}] {problem}"
    return None


def _icon_problem(icon: Any) -> str | None:
    if not isinstance(icon, dict):
        return "must be an object (an Icon)"
    if not isinstance(icon.get("src"), str):
        return "needs src (a string)"
    if "mimeType" in icon and not isinstance(icon["mimeType"], str):
        return "mimeType must be a string"
    sizes = icon.get("sizes", [])
    if not isinstance(sizes, list) or not all(isinstance(size, str) for size in sizes):
        return "sizes must be an array of strings"
    if "theme" in icon and icon["theme"] not in ("light", "dark"):
        return "theme must be \"light\" or \"dark\""
    return None


#: A client sends the same capabilities and identity with every request: they
#: are checked and structured once (a few hundred entries at most; then the
#: cache restarts).
_CAPS_CACHE: dict[bytes | str, ClientCapabilities] = {}
_INFO_CACHE: dict[bytes | str, Implementation] = {}
_CACHE_SIZE: Final = 256
#: Larger values are structured each time, never kept (memory stays bounded).
_CACHE_KEY_CHARS: Final = 4096


def _capabilities(caps: dict[str, Any]) -> ClientCapabilities:
    key = value_key(caps)
    found = _CAPS_CACHE.get(key)
    if found is None:
        problem = capabilities_problem(caps)
        if problem is not None:
            raise _bad_meta(META_CLIENT_CAPABILITIES, f"is malformed: {problem}")
        try:
            found = converter.structure(caps, ClientCapabilities)
        except Exception:
            raise _bad_meta(META_CLIENT_CAPABILITIES, "is malformed") from None
        if len(key) <= _CACHE_KEY_CHARS:  # (a huge one is not kept)
            if len(_CAPS_CACHE) >= _CACHE_SIZE:
                _CAPS_CACHE.clear()
            _CAPS_CACHE[key] = found
    return found


def _client_info(raw: Any) -> Implementation:
    key = value_key(raw)
    found = _INFO_CACHE.get(key)
    if found is None:
        problem = implementation_problem(raw)
        if problem is not None:
            raise _bad_meta(META_CLIENT_INFO, problem)
        try:
            found = converter.structure(raw, Implementation)
        except Exception:
            raise _bad_meta(META_CLIENT_INFO, "is malformed") from None
        if len(key) <= _CACHE_KEY_CHARS:
            if len(_INFO_CACHE) >= _CACHE_SIZE:
                _INFO_CACHE.clear()
            _INFO_CACHE[key] = found
    return found


def unsupported_version(requested: str) -> McpError:
    """The -32022 error naming every version this side speaks."""
    return McpError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version: {requested[:40]!r}",
        {"supported": list(ALL_PROTOCOL_VERSIONS), "requested": requested},
    )


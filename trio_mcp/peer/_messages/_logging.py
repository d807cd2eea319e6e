"""Types of the logging utility: ``logging/setLevel`` and ``notifications/message``."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import attrs

from ._base import Meta, _extra, _meta

LoggingLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
#: The RFC 5424 severities, least severe first.
LOGGING_LEVELS: Final[tuple[str, ...]] = (
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
)


def level_rank(level: str) -> int:
    """The rank of a level in :data:`LOGGING_LEVELS` (debug is 0).

    Raises:
        ValueError: ``level`` is not an RFC 5424 level name.
    """
    try:
        return LOGGING_LEVELS.index(level)
    except ValueError:
        raise ValueError(f"unknown logging level {level!r}") from None


@attrs.frozen
class SetLevelParams:
    """Parameters of ``logging/setLevel``."""

    level: str
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class LoggingMessageParams:
    """Parameters of ``notifications/message``: ``data`` is any JSON value."""

    level: str
    data: Any
    logger: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()

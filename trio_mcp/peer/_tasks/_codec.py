"""The JSON codec of a task's outcome, shared by the durable stores (SQLite, Redis).

A result is kept as ``{"result": ...}``, an error as ``{"error": {"code", "message",
"data"?}}``.
"""

from __future__ import annotations

import json
from typing import Any

from .._messages import ErrorData
from ._store import TaskOutcome


def outcome_to_json(outcome: TaskOutcome | None) -> str | None:
    """A task's outcome as the JSON text the durable stores keep (``None`` stays ``None``)."""
    if outcome is None:
        return None
    if isinstance(outcome, ErrorData):
        error: dict[str, Any] = {"code": outcome.code, "message": outcome.message}
        if outcome.data is not None:
            error["data"] = outcome.data
        return json.dumps({"error": error}, ensure_ascii=False)
    return json.dumps({"result": outcome}, ensure_ascii=False)


def outcome_from_json(text: str | None) -> TaskOutcome | None:
    """The outcome :func:`outcome_to_json` wrote (``None`` stays ``None``)."""
    if text is None:
        return None
    value = json.loads(text)
    if "error" in value:
        error = value["error"]
        return ErrorData(int(error["code"]), str(error["message"]), error.get("data"))
    result: dict[str, Any] = value["result"]
    return result

"""Questions a task's requestor pulls (the 2026-07-28 tasks extension).

In 2025-11-25 a task's questions are pushed: sent to the requestor as
requests (``TaskActor.ask``). With the tasks extension the requestor pulls
them: ``tasks/get`` shows the outstanding ones (``inputRequests``, keyed,
each key unique for the task's life) and ``tasks/update`` answers them
(``inputResponses``; unknown or already answered keys are ignored, a
partial set is fine). :class:`PulledInputs` is that mailbox; an actor that
has one asks through it (``TaskActor.ask``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

import attrs
import trio

#: Most outstanding questions one task may hold at once.
MAX_OUTSTANDING = 64


@final
@attrs.define(eq=False)
class _Question:
    method: str
    params: dict[str, Any]
    answer: dict[str, Any] | None = None
    answered: trio.Event = attrs.field(factory=trio.Event)


@final
@attrs.define(eq=False)
class PulledInputs:
    """The outstanding questions of one task whose requestor pulls them.

    Attributes:
        capabilities: What the requestor declared (opaque here: the features
            check a question against it before asking).
    """

    capabilities: Any = None
    _outstanding: dict[str, _Question] = attrs.field(factory=dict)
    _issued: set[str] = attrs.field(factory=set)
    #: Put before every key made here: a re-run's (``"a2."``) never reuses a key an
    #: earlier run of the task showed (a late answer to it is ignored, not misread).
    key_prefix: str = ""

    def key_for(self, wanted: str | None, method: str) -> str:
        """A key never issued before in this task (``wanted`` if it is still free)."""
        if wanted is not None and self.key_prefix:
            wanted = self.key_prefix + wanted
        if wanted is not None and wanted not in self._issued:
            key = wanted
        else:
            base = wanted or self.key_prefix + method.split("/")[0]
            n = len(self._issued) + 1
            key = f"{base}-{n}"
            while key in self._issued:
                n += 1
                key = f"{base}-{n}"
        self._issued.add(key)
        return key

    def post(self, method: str, params: dict[str, Any], key: str | None = None) -> str:
        """Post one question (shown by :meth:`requests` from now on); its key.

        Raises:
            RuntimeError: Too many questions outstanding at once.
        """
        if len(self._outstanding) >= MAX_OUTSTANDING:
            raise RuntimeError(f"at most {MAX_OUTSTANDING} outstanding questions per task")
        chosen = self.key_for(key, method)
        self._outstanding[chosen] = _Question(method, params)
        return chosen

    async def wait(self, key: str) -> dict[str, Any]:
        """Wait for the answer to the question posted under ``key`` (raw result JSON).

        Cancellation: the question is withdrawn (``tasks/get`` no longer shows it).
        """
        question = self._outstanding[key]
        try:
            await question.answered.wait()
        finally:
            self._outstanding.pop(key, None)
        assert question.answer is not None
        return question.answer

    def requests(self) -> dict[str, dict[str, Any]]:
        """The outstanding questions as ``inputRequests`` (key -> ``{method, params}``)."""
        return {
            key: {"method": q.method, "params": q.params}
            for key, q in self._outstanding.items() if not q.answered.is_set()
        }

    def answer(self, responses: Mapping[str, Any]) -> int:
        """Deliver ``inputResponses``; keys not outstanding are ignored.

        Returns:
            How many questions were answered.
        """
        delivered = 0
        for key, value in responses.items():
            question = self._outstanding.get(key)
            if question is None or question.answered.is_set() or not isinstance(value, dict):
                continue
            question.answer = value
            question.answered.set()
            delivered += 1
        return delivered

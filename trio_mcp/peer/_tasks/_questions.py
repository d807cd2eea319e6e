"""Pulled questions: :class:`PulledInputs`, the task-question strategy where the requestor polls.

A task actor asks its requestor for input (elicitation, sampling, roots)
through the strategy its creator handed it (:attr:`TaskActor.questions`, a
``_actor.TaskQuestions``); the runtime knows two, and no era:

* pushed (``_actor.PUSHED``, the default): each question is a request sent to
  the requestor's connection, with the related-task ``_meta``;
* pulled (:class:`PulledInputs`): the requestor polls. ``tasks/get`` shows the
  outstanding questions (keyed, each key unique for the task's life) and an
  answer comes back keyed (unknown or already answered keys are ignored, a
  partial set is fine). Such a requestor gets no notifications of the task:
  its progress is the task's status message.

Which one a task gets is its era's decision (the dialect's), not the runtime's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

if TYPE_CHECKING:
    from ._actor import TaskActor
    from ._connection import TaskConnection


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
    """The outstanding questions of one task whose requestor pulls them (a
    ``TaskQuestions``): a mailbox that ``tasks/get`` reads (:meth:`requests`)
    and the requestor's answers fill (:meth:`answer`)."""

    notifies = False
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

    def post(
        self, actor: TaskActor, method: str, params: dict[str, Any], key: str | None
    ) -> tuple[str, str, dict[str, Any]]:
        """Post one question (shown by :meth:`requests` from now on); its key, method
        and params (what :meth:`wait` takes).

        Raises:
            RuntimeError: Too many questions outstanding at once.
        """
        if len(self._outstanding) >= MAX_OUTSTANDING:
            raise RuntimeError(f"at most {MAX_OUTSTANDING} outstanding questions per task")
        chosen = self.key_for(key, method)
        self._outstanding[chosen] = _Question(method, params)
        return chosen, method, params

    async def wait(
        self, actor: TaskActor, posted: tuple[str, str, dict[str, Any]]
    ) -> tuple[dict[str, Any], TaskConnection | None]:
        """Wait for the answer to a posted question: here, or (tasks shared by
        processes) through the store from any process, whichever comes first.

        Cancellation: the question is withdrawn (``tasks/get`` no longer shows it).
        """
        key, method, params = posted
        relay = actor.registry.input_relay
        if relay is not None:  # shared by processes: queued in the store too
            return await relay.ask_pulled(actor, self, key, method, params), None
        return await self.answered(key), None

    async def answered(self, key: str) -> dict[str, Any]:
        """The answer to the question posted under ``key`` here (raw result JSON).

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

"""Task trees across peers: what a task knows of its parent and its remote children.

A tool running as a task may start tasks on other peers through its
``ctx.children()`` scope (``_features/_children.py``). This module is the
task runtime's half of that: the :class:`TaskTree` an actor carries once it
is part of a tree (it has a parent, children, or both), what its snapshot
shows of it (``_meta`` keys under this project's own namespace, see
:data:`META_PARENT`), its signs of life, and the opt-in watchdog that
cancels a child whose parent stopped following it
(``TaskLimits.orphan_after``).

Nothing here sends a message: the features layer follows and cancels the
children; this module keeps what they learned, for ``tasks/get``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol, TypeVar, final

import attrs
import trio

from ..._util import unwrap_group

#: The project's own ``_meta`` namespace (a reverse-DNS prefix, as the spec asks of
#: implementation-defined keys).
META_NAMESPACE: Final = "io.github.trio-mcp/"
#: In a task-augmented request's ``_meta``: the requestor's task this one is a child of
#: (``{"taskId": ..., "url": ...}``, the URL when the requestor knows its own).
META_PARENT: Final = META_NAMESPACE + "parent"
#: In ``tasks/get``'s ``_meta``: the task's remote children, as last seen by it.
META_CHILDREN: Final = META_NAMESPACE + "children"
#: In ``tasks/get``'s ``_meta``: the question the task waits on (``input_required``).
META_QUESTION: Final = META_NAMESPACE + "question"
#: Most children one task lists in its snapshot (the newest are kept).
MAX_LISTED_CHILDREN: Final = 64
#: Deepest subtree a snapshot carries (children of children...).
MAX_DEPTH: Final = 8


@final
@attrs.define(eq=False)
class ChildLink:
    """One remote child of a task, as its parent last saw it.

    Attributes:
        task_id: The child's id on its peer.
        url: The child's peer (its endpoint URL), when known.
        status: Its status at the parent's last look.
        status_message: Its status message then.
        meta: The tree ``_meta`` its own snapshot carried (its children, question).
        detached: Started outside a children scope's ownership (not cancelled with it).
    """

    task_id: str
    url: str | None
    status: str = "working"
    status_message: str | None = None
    meta: dict[str, Any] | None = None
    detached: bool = False

    def observe(self, status: str, message: str | None, meta: dict[str, Any] | None) -> None:
        """Take what the parent just saw of the child (a ``tasks/get``)."""
        self.status, self.status_message = status, message
        if meta:
            self.meta = {k: v for k, v in meta.items() if k.startswith(META_NAMESPACE)}

    def wire(self, depth: int = 0) -> dict[str, Any]:
        """The child as its parent's snapshot lists it."""
        out: dict[str, Any] = {"taskId": self.task_id, "status": self.status}
        if self.url is not None:
            out["url"] = self.url
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        if self.detached:
            out["detached"] = True
        if self.meta and depth < MAX_DEPTH:
            question = self.meta.get(META_QUESTION)
            if isinstance(question, dict):
                out["question"] = question
            children = self.meta.get(META_CHILDREN)
            if isinstance(children, list):
                out["children"] = children
        return out


@final
@attrs.define(eq=False)
class TaskTree:
    """What one task knows of its place in a tree (kept on its actor, ``actor.tree``).

    Attributes:
        parent: The parent as the creating request named it (``taskId``, ``url``).
        children: The remote children, oldest first.
        last_seen: When the requestor last showed a sign of life for this task
            (a ``tasks/get`` from its parent's children scope, naming the parent),
            in Trio's clock.
    """

    parent: dict[str, Any] | None = None
    children: list[ChildLink] = attrs.field(factory=list)
    last_seen: float = attrs.field(factory=trio.current_time)
    _questions: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    _next: int = 0

    def seen(self) -> None:
        """The requestor showed a sign of life."""
        self.last_seen = trio.current_time()

    def add_child(self, task_id: str, url: str | None, *, detached: bool = False) -> ChildLink:
        """Record a child started on another peer; returns its link."""
        link = ChildLink(task_id, url, detached=detached)
        self.children.append(link)
        if len(self.children) > MAX_LISTED_CHILDREN:
            del self.children[0]
        return link

    def asking(self, method: str, params: dict[str, Any]) -> int:
        """A question goes to the requestor; returns its number for :meth:`answered`."""
        self._next += 1
        shown: dict[str, Any] = {"method": method}
        message = params.get("message")
        if isinstance(message, str):
            shown["message"] = message[:500]
        self._questions[self._next] = shown
        return self._next

    def answered(self, number: int) -> None:
        """The question numbered ``number`` is no longer open."""
        self._questions.pop(number, None)

    def meta(self) -> dict[str, Any]:
        """The tree ``_meta`` of the task's snapshot (``tasks/get``)."""
        out: dict[str, Any] = {}
        if self.parent is not None:
            out[META_PARENT] = self.parent
        if self.children:
            out[META_CHILDREN] = [child.wire() for child in self.children]
        if self._questions:
            out[META_QUESTION] = next(iter(self._questions.values()))
        return out


def parent_of(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """The parent a task-augmented request's ``_meta`` names (``None``: none, or malformed)."""
    parent = (meta or {}).get(META_PARENT)
    if not isinstance(parent, dict) or not isinstance(parent.get("taskId"), str):
        return None
    out: dict[str, Any] = {"taskId": parent["taskId"][:256]}
    url = parent.get("url")
    if isinstance(url, str):
        out["url"] = url[:2048]
    return out


class InTree(Protocol):
    """What this module needs of a task actor: its tree node slot."""

    tree: TaskTree | None


A = TypeVar("A", bound=InTree)
_Work = Callable[[A], Awaitable[dict[str, Any]]]


def tree_of(actor: InTree) -> TaskTree:
    """The actor's tree node, made on first use."""
    if actor.tree is None:
        actor.tree = TaskTree()
    tree: TaskTree = actor.tree
    return tree


def watch_orphan(
    after: float, cancel: Callable[[], Awaitable[object]]
) -> Callable[[_Work[A]], _Work[A]]:
    """A work wrapper: cancel the task (``cancel()``) when its requestor showed no sign of
    life for ``after`` seconds (a child whose parent stopped following it).

    The watchdog runs beside the work in the actor's scope; ``cancel`` is the registry's
    own ``tasks/cancel`` (status first, then the scope), so the task ends ``cancelled``
    and its own children scope cancels its children in turn.
    """

    def wrapper(work: _Work[A]) -> _Work[A]:
        async def run(task: A) -> dict[str, Any]:
            tree = tree_of(task)
            tree.seen()

            async def watchdog() -> None:
                while True:
                    await trio.sleep_until(tree.last_seen + after)
                    if trio.current_time() >= tree.last_seen + after:
                        await cancel()
                        return

            with unwrap_group():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(watchdog)
                    result = await work(task)
                    nursery.cancel_scope.cancel()
            return result

        return run

    return wrapper


class RunningActors(Protocol):
    """What :func:`followed` needs of the registry."""

    def running_actor(self, task_id: str) -> InTree | None:
        """The actor of a task running in this process, if any."""
        ...


def followed(
    registry: RunningActors, task_id: str, meta: dict[str, Any] | None
) -> dict[str, Any] | None:
    """A ``tasks/get`` of ``task_id`` whose request ``_meta`` is ``meta``: the tree
    ``_meta`` of its snapshot (``None`` when the task is in no tree here).

    When ``meta`` names the task's own parent (its children scope following it), the
    request is the parent's sign of life (see ``TaskLimits.orphan_after``); anyone
    else's look at the task is not.
    """
    actor = registry.running_actor(task_id)
    if actor is None or actor.tree is None:
        return None
    tree: TaskTree = actor.tree
    asker = parent_of(meta)
    if asker is not None and tree.parent is not None and asker["taskId"] == tree.parent["taskId"]:
        tree.seen()
    return tree.meta() or None

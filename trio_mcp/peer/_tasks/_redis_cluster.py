"""The Redis task store on Redis Cluster: what spans slots, done in single-slot steps.

On Redis Cluster a Lua script may only touch the keys of one slot. A task's own keys
(its hash, input queue, answers) share the hash tag ``{t:ID}``, so every operation on
one task is still one atomic script. What spans a task, its owner (live set and
``tasks/list`` index, tag ``{o:OWNER}``) and its runner (runs set and lease, tag
``{i:INSTANCE}``) is done here as a few single-slot steps, in an order that keeps
the store's promises whenever a process stops between two of them:

* create: (1) the runner's runs set and lease, its place in the instance set, and a
  block of the global seq (one pipeline); (2) the task's hash; (3) the owner admits
  it under the live cap (atomic in the owner's slot) and indexes it. A task is in a
  runs set of a listed instance before it has a hash (a dead runner's sweep finds
  it), and has a hash before it is in its owner's sets (so an id in them without a
  hash is gone for good, and is dropped). A task the cap refuses is deleted again.
* a task that became terminal (update, cancel, sweep) leaves its owner's live set
  and its runner's runs set in a next step; until then the live set may hold it,
  and a create that finds the owner at the cap first drops the members that are
  terminal or gone (as the standalone script does), then tries again.
* the sweep: for each listed instance whose lease is gone, read its runs set unless
  its lease came back (one script), fail each of those tasks still running on it
  (one script per task, compare-and-set), drop them from the owners' live sets and
  the runs set, and only then take the instance out of the instance set (putting it
  back if its lease came back meanwhile): a sweeper that stops half way leaves the
  rest to the next.

The commands of one step that go to many slots are sent in one pipeline (one write
per node; a node runs them in order, so two writes of one task keep their order);
scripts go by their SHA (loaded on every node at open, and again if a node lost
them), so a pipeline costs no ``SCRIPT EXISTS`` round trip.
Each operation is still bounded by the store's ``op_timeout`` as a whole.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar, final

import attrs
import trio
from coredis.exceptions import NoScriptError

from ._redis_scripts import RedisKeys

T = TypeVar("T")

_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})


#: One command of a batch: given the client (or pipeline) to send it through, its request.
Call = Callable[[Any], Awaitable[Any]]


def _command(name: str, *args: Any) -> Call:
    """A call of the client's command ``name`` with ``args`` (for :func:`batch`)."""
    return lambda via: getattr(via, name)(*args)


async def batch(client: Any, calls: Sequence[Call]) -> list[Any]:
    """Send ``calls`` in one pipeline (one write per node; the commands of one slot stay
    in their order); their results, in order."""
    if len(calls) <= 1:
        return [await call(client) for call in calls]
    async with client.pipeline(transaction=False) as pipe:
        requests = [call(pipe) for call in calls]
    return [await request for request in requests]


async def gather(calls: Sequence[Awaitable[T]]) -> list[T]:
    """Await ``calls`` (steps of several commands) concurrently; their results in order.
    The first error is raised as itself (not in a group) unless a cancellation is among
    them."""
    if len(calls) == 1:
        return [await calls[0]]
    out: list[Any] = [None] * len(calls)

    async def one(i: int, call: Awaitable[T]) -> None:
        out[i] = await call

    try:
        async with trio.open_nursery() as nursery:
            for i, call in enumerate(calls):
                nursery.start_soon(one, i, call)
    except BaseExceptionGroup as group:
        first = group.exceptions[0]
        if group.subgroup(trio.Cancelled) is None and isinstance(first, Exception):
            raise first from None
        raise
    return out


def _pairs(flat: Sequence[Any]) -> dict[str, str]:
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}


def _grouped(pairs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, member in pairs:
        out.setdefault(name, []).append(member)
    return out


@final
@attrs.define(eq=False)
class SlotSteps:
    """The multi-slot operations of :class:`~._redis.RedisTaskStore` on Redis Cluster.

    Args:
        keys: The key names (``cluster=True``).
        instance: This process's id.
        lease_ms: The lease, in ms (text).
        scripts: The registered scripts by name (``c_*`` and the task scripts).
    """

    keys: RedisKeys
    instance: str
    lease_ms: str
    scripts: dict[str, Any]

    def _run(self, name: str, keys: list[str], args: Sequence[str] = ()) -> Call:
        """A call of script ``name`` by its SHA (for :meth:`_batch`, which loads the
        scripts again when a node lost them)."""
        sha = self.scripts[name].sha
        return lambda via: via.evalsha(sha, keys=keys, args=list(args))

    async def _batch(self, client: Any, calls: Sequence[Call]) -> list[Any]:
        """:func:`batch`; when a node has lost the scripts (it restarted: they are not
        persisted), load them on every node and send the batch again (each step is
        safe to repeat)."""
        try:
            return await batch(client, calls)
        except NoScriptError:
            for script in self.scripts.values():
                await client.script_load(script.script)
            return await batch(client, calls)

    async def _one(self, client: Any, call: Call) -> Any:
        [answer] = await self._batch(client, [call])
        return answer

    def _task_script(self, name: str, task_id: str, *args: str) -> Call:
        """A call of the task script ``name`` on ``task_id`` (ARGV: prefix, id, args)."""
        return self._run(name, [self.keys.task(task_id)], [self.keys.prefix, task_id, *args])

    # --- create ----------------------------------------------------------------------

    async def create_many(
        self, client: Any, creates: Sequence[list[str]], max_live: int, now_ms: int
    ) -> list[int]:
        """Create tasks (CREATE's arguments after the prefix, each run by this
        instance); each one's seq, or -1 (cap reached) or -2 (id taken)."""
        keys = self.keys
        running = [a[0] for a in creates if a[3] not in _TERMINAL]
        steps: list[Call] = [_command("incrby", keys.seq, len(creates))]
        if running:  # in the instance set (the sweepers' list) with its runs set, always
            steps.append(_command("sadd", keys.instances, [self.instance]))
            steps.append(self._run(
                "c_enlist", [keys.runs(self.instance), keys.lease(self.instance)],
                [self.lease_ms, *running],
            ))  # fmt: skip
        found = await self._batch(client, steps)
        last = int(found[0])
        enlisted: dict[str, bool] = {}
        if running:
            _, added = found[2]
            enlisted = {tid: bool(a) for tid, a in zip(running, added, strict=True)}
        first = last - len(creates) + 1
        seqs = [
            int(s) for s in await self._batch(client, [
                self._run("c_create", [keys.task(a[0])], [keys.prefix, str(first + i), *a])
                for i, a in enumerate(creates)
            ])
        ]  # fmt: skip
        admitted = await self._admit(client, creates, seqs, max_live, now_ms)
        undo: list[Call] = []
        out: list[int] = []
        for a, seq, ok in zip(creates, seqs, admitted, strict=True):
            task_id = a[0]
            if seq == -2:
                out.append(-2)
                if enlisted.get(task_id):
                    undo.append(self._srem(keys.runs(self.instance), [task_id]))
            elif not ok:
                out.append(-1)
                undo.append(_command("delete", [keys.task(task_id)]))
                if task_id in enlisted:
                    undo.append(self._srem(keys.runs(self.instance), [task_id]))
            else:
                out.append(seq)
        await self._batch(client, undo)
        return out

    @staticmethod
    def _srem(key: str, members: list[str]) -> Call:
        return _command("srem", key, members)

    async def _admit(
        self,
        client: Any,
        creates: Sequence[list[str]],
        seqs: Sequence[int],
        max_live: int,
        now_ms: int,
    ) -> list[bool]:
        """Step 3 of create: each owner admits its new tasks; heal and retry once at the cap."""
        by_owner: dict[str, list[int]] = {}
        for i, (a, seq) in enumerate(zip(creates, seqs, strict=True)):
            if seq > 0:
                by_owner.setdefault(a[1], []).append(i)
        ok = [False] * len(creates)

        async def admit(owner: str, which: list[int]) -> list[int]:
            args: list[str] = [str(max_live), str(now_ms)]
            for i in which:
                a = creates[i]
                args += [a[0], str(seqs[i]), "0" if a[3] in _TERMINAL else "1", a[7]]
            found = await self.scripts["c_admit"](
                keys=[self.keys.live(owner), self.keys.index(owner)], args=args
            )
            refused = []
            for i, answer in zip(which, found, strict=True):
                ok[i] = int(answer) == 1
                if not ok[i]:
                    refused.append(i)
            return refused

        async def owner_step(owner: str, which: list[int]) -> None:
            refused = await admit(owner, which)
            if refused and await self._heal(client, owner, now_ms):
                await admit(owner, refused)

        await gather([owner_step(owner, which) for owner, which in by_owner.items()])
        return ok

    async def _heal(self, client: Any, owner: str, now_ms: int) -> bool:
        """Drop the members of ``owner``'s live set that are terminal or gone; any?"""
        live = self.keys.live(owner)
        members = sorted(await client.smembers(live))
        if not members:
            return False
        states = await self._batch(client, [self._state(m) for m in members])
        stale = [
            m for m, (status, expires) in zip(members, states, strict=True)
            if status is None or status in _TERMINAL
            or (expires is not None and int(expires) <= now_ms)
        ]  # fmt: skip
        if stale:
            await client.srem(live, stale)
        return bool(stale)

    def _state(self, task_id: str) -> Call:
        return _command("hmget", self.keys.task(task_id), ["status", "expires"])

    # --- changes of one task, and what follows them ----------------------------------

    async def _finished(self, client: Any, done: Sequence[tuple[str, str, str | None]]) -> None:
        """Tasks ``(id, owner, runner)`` became terminal: drop them from the live and
        runs sets."""
        steps: list[Call] = []
        for owner, ids in _grouped([(owner, tid) for tid, owner, _ in done]).items():
            steps.append(self._srem(self.keys.live(owner), ids))
        runners = [(runner, tid) for tid, _, runner in done if runner]
        for runner, ids in _grouped(runners).items():
            steps.append(self._srem(self.keys.runs(runner), ids))
        await self._batch(client, steps)

    async def update_many(self, client: Any, updates: Sequence[list[str]]) -> list[bool]:
        """UPDATE each task (its arguments after the prefix); whether each applied.

        One pipeline: the writes of one task (one slot, one node) apply in order."""
        found = await self._batch(client, [
            self._run("c_update", [self.keys.task(a[0])], [self.keys.prefix, *a])
            for a in updates
        ])  # fmt: skip
        done = [
            (a[0], str(owner), runner or None)
            for a, (_, owner, runner) in zip(updates, found, strict=True)
            if owner
        ]
        await self._finished(client, done)
        return [bool(int(applied)) for applied, _, _ in found]

    async def cancel(self, client: Any, task_id: str, *args: str) -> list[Any] | None:
        """CANCEL the task; the hash after (flat), or None if it is gone."""
        flat = await self._one(client, self._task_script("cancel", task_id, *args))
        if not flat:
            return None
        h = _pairs(flat)
        if h.get("status") in _TERMINAL:
            await self._finished(client, [(task_id, h["owner"], h.get("runner"))])
        return list(flat)

    async def delete(self, client: Any, task_id: str) -> None:
        """Delete the task's keys, then its place in its owner's and runner's sets."""
        owner, runner = await self._one(client, self._task_script("c_delete", task_id))
        steps: list[Call] = []
        if owner:
            steps += [_command("zrem", self.keys.index(owner), [task_id]),
                      self._srem(self.keys.live(owner), [task_id])]  # fmt: skip
        if runner:
            steps.append(self._srem(self.keys.runs(runner), [task_id]))
        await self._batch(client, steps)

    # --- reads ---------------------------------------------------------------------------

    async def page(
        self, client: Any, owner: str, after_seq: int, limit: int, now_ms: int
    ) -> tuple[list[tuple[str, dict[str, str]]], bool]:
        """Up to ``limit`` live hashes of ``owner`` after ``after_seq`` (ids with them),
        and whether more remain; index entries of vanished tasks are dropped."""
        index = self.keys.index(owner)
        out: list[tuple[str, dict[str, str]]] = []
        vanished: list[str] = []
        cursor, more = str(after_seq), False
        size = str(max(limit + 1, 16))
        while not more:
            rows = await self._one(client, self._run("c_page_ids", [index], [cursor, size]))
            if not rows:
                break
            ids = [str(rows[i]) for i in range(0, len(rows), 2)]
            hashes = await self._batch(client, [self._hash(t) for t in ids])
            for task_id, h in zip(ids, hashes, strict=True):
                if not h:
                    vanished.append(task_id)
                elif not ((exp := h.get("expires")) is not None and int(exp) <= now_ms):
                    if len(out) == limit:
                        more = True
                        break
                    out.append((task_id, dict(h)))
            cursor = str(rows[-1])
        if vanished:
            await client.zrem(index, vanished)
        return out, more

    def _hash(self, task_id: str) -> Call:
        return _command("hgetall", self.keys.task(task_id))

    async def terminal_among(self, client: Any, task_ids: Sequence[str], now_ms: int) -> set[str]:
        """Which of these ids are terminal, gone or expired."""
        states = await self._batch(client, [self._state(t) for t in task_ids])
        return {
            t for t, (status, expires) in zip(task_ids, states, strict=True)
            if status is None or status in _TERMINAL
            or (expires is not None and int(expires) <= now_ms)
        }  # fmt: skip

    # --- leases ----------------------------------------------------------------------

    async def renew(self, client: Any) -> bool:
        """Take or renew the lease, (re)join the instance set; whether it was held."""
        had = await self._one(
            client, self._run("c_renew", [self.keys.lease(self.instance)], [self.lease_ms])
        )
        await client.sadd(self.keys.instances, [self.instance])
        return bool(int(had))

    async def sweep(
        self, client: Any, message: str, updated: str, instance: str, now_ms: int
    ) -> tuple[int, list[str], int]:
        """The running tasks of dead instances (or of ``instance``, releasing its lease):
        re-runnable ones queued to run again (or failed after their last attempt), the
        others failed with ``message``; how many failed, which instances were dead,
        how many were queued."""
        keys = self.keys
        if instance:
            await client.delete([keys.lease(instance)])
            dead = [instance]
        else:
            members = sorted(await client.smembers(keys.instances))
            held = await self._batch(client, [_command("exists", [keys.lease(m)]) for m in members])
            dead = [m for m, h in zip(members, held, strict=True) if not int(h)]
        failed = queued = 0
        for inst in dead:
            runs = await self._one(
                client, self._run("c_dead_runs", [keys.runs(inst), keys.lease(inst)])
            )
            if runs is None or runs is False:  # its lease is back: it lives
                continue
            ids = sorted(str(t) for t in runs)
            if ids:
                f, q = await self._requeue(
                    client, ids, inst, ["1", "1", "", updated, str(now_ms), message]
                )
                failed, queued = failed + f, queued + q
            await client.srem(keys.workers, [inst])
            # Only now (a sweeper stopped before this leaves it for the next one) leave
            # the instance set; an instance whose lease came back meanwhile rejoins
            # (its renewals set the lease, then join the set: one of the two sees it).
            await client.srem(keys.instances, [inst])
            if int(await client.exists([keys.lease(inst)])):
                await client.sadd(keys.instances, [inst])
        return failed, dead, queued

    # --- handing re-runnable tasks between processes ---------------------------------

    async def _requeue(
        self, client: Any, ids: Sequence[str], runner: str, args: list[str]
    ) -> tuple[int, int]:
        """C_REQUEUE_ONE on each of ``runner``'s tasks ``ids`` (``args``: count, spend,
        message, updated, now_ms, fail_message), then the queue, the live sets and the
        runs set; how many failed and how many were queued."""
        found = await self._batch(
            client, [self._task_script("c_requeue_one", t, runner, *args) for t in ids]
        )
        due: dict[str, float] = {}
        done: list[tuple[str, str, str | None]] = []
        for task_id, (code, when, owner) in zip(ids, found, strict=True):
            if int(code) in (1, 3):
                due[task_id] = float(when)
            elif int(code) in (2, 4):
                done.append((task_id, str(owner), None))
        steps: list[Call] = []
        if due:
            steps.append(_command("zadd", self.keys.queue, due))
        await self._batch(client, steps)  # queued before it leaves the runs set
        await self._finished(client, done)
        await client.srem(self.keys.runs(runner), list(ids))
        return len(done), sum(1 for code, _, _ in found if int(code) == 1)

    async def requeue(
        self,
        client: Any,
        task_ids: Sequence[str],
        count: bool,
        spend: bool,
        message: str | None,
        updated: str,
        now_ms: int,
    ) -> int:
        """Queue these live re-runnable tasks of this instance again (see the store's
        ``requeue``); how many workers are alive."""
        workers = await self.live_workers(client)
        if message is None:
            message = (
                "queued: waiting for a worker process to run it" if workers
                else "queued: no worker process is alive to run it"
            )  # fmt: skip
        if task_ids:
            flags = ["1" if count else "0", "1" if spend else "0"]
            await self._requeue(
                client, task_ids, self.instance, [*flags, message, updated, str(now_ms), ""]
            )
        return workers

    async def live_workers(self, client: Any) -> int:
        """How many worker instances hold a lease (dropping those that do not)."""
        members = sorted(await client.smembers(self.keys.workers))
        held = await self._batch(
            client, [_command("exists", [self.keys.lease(m)]) for m in members]
        )
        gone = [m for m, h in zip(members, held, strict=True) if not int(h)]
        if gone:
            await client.srem(self.keys.workers, gone)
        return len(members) - len(gone)

    async def claim(
        self, client: Any, tools: Sequence[str], limit: int, now_ms: int
    ) -> list[tuple[str, dict[str, str]]]:
        """Take up to ``limit`` due queued tasks of ``tools`` for this instance: listed
        in its runs set first, then taken in their own slots (one wins a race), then
        out of the queue; their hashes."""
        keys = self.keys
        due = await self._one(
            client, self._run("c_queue_due", [keys.queue], [str(now_ms), str(limit * 4 + 16)])
        )
        candidates = [str(t) for t in due]
        out: list[tuple[str, dict[str, str]]] = []
        drop: list[str] = []
        while candidates and len(out) < limit:
            chunk, candidates = candidates[: limit - len(out)], candidates[limit - len(out) :]
            await self._batch(client, [
                _command("sadd", keys.instances, [self.instance]),
                self._run("c_enlist", [keys.runs(self.instance), keys.lease(self.instance)],
                          [self.lease_ms, *chunk]),
            ])  # fmt: skip
            found = await self._batch(client, [
                self._task_script("c_claim_one", t, self.instance, str(now_ms), *tools)
                for t in chunk
            ])  # fmt: skip
            lost = []
            for task_id, answer in zip(chunk, found, strict=True):
                code = int(answer[0])
                if code == 2:
                    out.append((task_id, _pairs(answer[1])))
                    drop.append(task_id)
                else:
                    lost.append(task_id)
                    if code == 0:
                        drop.append(task_id)
            if lost:
                await client.srem(keys.runs(self.instance), lost)
        if drop:
            await client.zrem(keys.queue, drop)
        return out

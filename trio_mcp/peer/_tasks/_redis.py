"""A task store in Redis, shared by many server processes (:class:`RedisTaskStore`).

URL: ``redis://[user:password@]host:port/db``, ``rediss://...`` (TLS) or
``unix:///path/to/redis.sock?db=N``, with the query options ``lease=SECONDS``
(default 30), ``prefix=NAME`` (default ``trio-mcp``) and ``hint=SECONDS``; any
other query option goes to :mod:`coredis`. Needs the ``redis`` extra (coredis)
and Redis 6.0 or later (RESP3): a standalone Redis (or a primary), or Redis
Cluster with ``redis+cluster://host:port[,host:port...][/?options]`` (or
``rediss+cluster://`` for TLS; the same options; the nodes are where coredis's
cluster client starts discovering the cluster; no database number).

Key layout on a standalone Redis (``P`` is the prefix)::

    P:t:{task_id}      HASH  owner, seq, method, status, created, updated, ttl,
                             poll, expires (epoch ms; absent for ttl None), msg,
                             outcome (JSON text, written and read only by Python),
                             runner (the instance that runs it). PEXPIREAT at
                             expires + EXPIRY_MARGIN; past ``expires`` it reads as gone.
    P:o:{owner}        ZSET  task ids by seq (tasks/list); stale members are
                             dropped by paging; expires with its longest-lived task.
    P:live:{owner}     SET   the owner's non-terminal task ids (SCARD = live count,
                             healed by create when it reaches the cap).
    P:seq              STRING the global sequence counter (INCR).
    P:instances        SET   the instances that took a lease.
    P:lease:{instance} STRING present while the instance lives (SET PX lease).
    P:runs:{instance}  SET   the non-terminal task ids the instance runs.
    P:in:{task_id}     LIST  queued input requests ("<len(key)>:<key><json>").
    P:ans:{task_id}    HASH  request key -> answer JSON.
    P:secret           STRING the shared cursor secret (hex; SET NX by the first).
    P:hints            pub/sub channel: "kind|task_id", kind in status, cancel,
                             input, answer, queue.
    P:queue, P:workers and a re-runnable task's hash fields (tool, attempts, backoff,
                             job, attempt): see :mod:`._redis_rerun`.

On Redis Cluster the same data lives under names whose hash tag keeps what one
script touches in one slot (:class:`~._redis_scripts.RedisKeys`)::

    P:{t:ID}  P:{t:ID}:in  P:{t:ID}:ans           a task's keys: one slot
    P:{o:OWNER}:tasks  P:{o:OWNER}:live           an owner's index and live set
    P:{i:INSTANCE}:lease  P:{i:INSTANCE}:runs     an instance's lease and runs
    P:seq  P:instances  P:secret  P:hints         as above (one key each; the
                                                  channel is cluster-wide pub/sub)

so the tasks of one owner spread over every master. What spans those groups
(create under the live cap, a task turning terminal, pages, the sweep) is done in
single-slot steps (:mod:`._redis_cluster`).

Every change is one Lua script (:mod:`._redis_scripts`): atomic, one round
trip (on Redis Cluster: one per slot it touches). Every call is bounded by
:attr:`RedisTaskStore.op_timeout`; when Redis cannot be reached it raises
:func:`~._shared.store_unavailable`, and the next call after Redis returns works again.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar, final

import coredis
import trio
from coredis.exceptions import RedisError
from coredis.retry import NoRetryPolicy

from ..._inline import leave_reader
from .._messages import TaskStatus
from . import _redis_rerun as rerun_lua
from . import _redis_scripts as lua
from ._codec import outcome_from_json, outcome_to_json
from ._redis_cluster import SlotSteps
from ._redis_loops import (
    client_url,
    closing_connections,
    cluster_nodes,
    hold_client,
    listen,
    unavailable_reason,
)
from ._rerun import LeaseClock, RerunTicket
from ._shared import LEASE_LOST_MESSAGE, SharedOptions, repeat, store_unavailable
from ._store import (
    CapReached,
    InputAnswer,
    InputItem,
    Opened,
    StoreEvents,
    TaskRecord,
    TaskStore,
    now_iso,
    trio_deadline,
    wall_expiry,
)

log = logging.getLogger("trio_mcp.tasks")
T = TypeVar("T")

#: Seconds one store call may take before it fails as "unavailable".
OP_TIMEOUT: Final = 5.0
#: Default key prefix.
DEFAULT_PREFIX: Final = "trio-mcp"
#: How long Redis keeps a record after its ``expires`` (ms).
EXPIRY_MARGIN_MS: Final = 60_000
_SCRIPTS: Final = {
    "create": lua.CREATE, "create_many": lua.CREATE_MANY, "update": lua.UPDATE,
    "update_many": lua.UPDATE_MANY, "cancel": lua.CANCEL, "delete": lua.DELETE,
    "page": lua.PAGE, "terminal_among": lua.TERMINAL_AMONG, "push_input": lua.PUSH_INPUT,
    "claim_input": lua.CLAIM_INPUT, "peek_inputs": lua.PEEK_INPUTS,
    "answer_input": lua.ANSWER_INPUT, "take_answer": lua.TAKE_ANSWER,
    "renew": lua.RENEW_LEASE, "secret": lua.SECRET,
    "rescue": rerun_lua.RESCUE, "requeue": rerun_lua.REQUEUE, "claim": rerun_lua.CLAIM,
    "set_worker": rerun_lua.SET_WORKER,
}  # fmt: skip
#: On Redis Cluster: a task's scripts with the cluster's key functions, and the
#: single-slot steps of what spans slots (:class:`~._redis_cluster.SlotSteps`).
_CLUSTER_SCRIPTS: Final = {
    **{name: lua.for_cluster(_SCRIPTS[name]) for name in (
        "cancel", "push_input", "claim_input", "peek_inputs", "answer_input", "take_answer",
    )},
    "secret": lua.SECRET, "c_update": lua.C_UPDATE, "c_enlist": lua.C_ENLIST,
    "c_create": lua.C_CREATE, "c_admit": lua.C_ADMIT, "c_delete": lua.C_DELETE,
    "c_page_ids": lua.C_PAGE_IDS, "c_renew": lua.C_RENEW, "c_dead_runs": lua.C_DEAD_RUNS,
    "c_fail": lua.C_FAIL, "c_requeue_one": rerun_lua.C_REQUEUE_ONE,
    "c_queue_due": rerun_lua.C_QUEUE_DUE, "c_claim_one": rerun_lua.C_CLAIM_ONE,
}  # fmt: skip
#: The URL schemes of a Redis Cluster.
CLUSTER_SCHEMES: Final = ("redis+cluster", "rediss+cluster")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _pairs(flat: list[Any]) -> dict[str, str]:
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}


def _record(task_id: str, h: dict[str, str]) -> TaskRecord | None:
    """The record a hash holds, or ``None`` when it is past its expiry."""
    expires = h.get("expires")
    now_wall = time.time()
    if expires is not None and int(expires) / 1000 <= now_wall:
        return None
    deadline = trio_deadline(
        None if expires is None else int(expires) / 1000, now_wall, trio.current_time()
    )
    ttl = h.get("ttl")
    return TaskRecord(
        task_id=task_id,
        owner=h["owner"],
        seq=int(h["seq"]),
        method=h["method"],
        status=TaskStatus(h["status"]),
        created_at=h["created"],
        last_updated_at=h["updated"],
        ttl=None if ttl is None else int(ttl),
        poll_interval=int(h["poll"]),
        deadline=deadline,
        status_message=h.get("msg"),
        outcome=outcome_from_json(h.get("outcome")),
        attempt=int(h.get("attempt", 1)),
        rerun=_ticket(h),
    )


def _ticket(h: dict[str, str]) -> RerunTicket | None:
    """A re-runnable task's ticket, from its hash."""
    job = h.get("job")
    if job is None:
        return None
    return RerunTicket(h["tool"], int(h["attempts"]), float(h["backoff"]) / 1000, job)


def _item_head(key: str) -> str:
    return f"{len(key)}:{key}"


def _encode_item(item: InputItem) -> str:
    body = json.dumps({"method": item.method, "params": item.params}, ensure_ascii=False)
    return _item_head(item.key) + body


def _decode_item(text: str) -> InputItem:
    size, _, rest = text.partition(":")
    key, body = rest[: int(size)], json.loads(rest[int(size) :])
    return InputItem(key=key, method=body["method"], params=body["params"])


@final
class RedisTaskStore:
    """A :class:`~._store.TaskStore` in Redis, shared by processes (see the module for
    the layout).

    Args:
        url: ``redis://host:port/db``, ``rediss://...``, ``unix:///path?db=N`` or
            ``redis+cluster://host:port,host:port/`` (Redis Cluster), optionally
            with ``lease=``, ``prefix=`` and ``hint=`` query options.
        lease_seconds: The lease (overrides the URL's ``lease``; default 30).
        prefix: The key prefix (overrides the URL's ``prefix``; default ``trio-mcp``).
        instance: This process's id (default: host, pid and a random part).

    Call :meth:`open` first, then keep :meth:`run` running (it renews the
    lease), and :meth:`aclose` at the end. They may be called from any task.
    """

    #: Other processes read and write the same tasks.
    shared = True

    def __init__(
        self,
        url: str,
        *,
        lease_seconds: float | None = None,
        prefix: str | None = None,
        instance: str | None = None,
    ) -> None:
        self.url = url
        shared = SharedOptions.parse(
            url, schemes=("redis", "rediss", "unix", *CLUSTER_SCHEMES),
            names=("lease", "prefix", "hint"), lease_seconds=lease_seconds, instance=instance,
        )  # fmt: skip
        #: On Redis Cluster (a ``redis+cluster://`` URL).
        self.cluster = url.split("://", 1)[0] in CLUSTER_SCHEMES
        self._client_url = client_url(shared.driver_url)
        self.lease_seconds = shared.lease_seconds
        self.lease = LeaseClock(self.lease_seconds)
        self.hint_seconds = shared.hint_seconds
        self.instance = shared.instance
        self.prefix = prefix if prefix is not None else shared.options.get("prefix", DEFAULT_PREFIX)
        self._lease_ms = str(math.ceil(self.lease_seconds * 1000))
        self._keys = lua.RedisKeys(self.prefix, cluster=self.cluster)
        self.op_timeout = OP_TIMEOUT
        self._client: Any = None  # coredis.Redis[str] or coredis.RedisCluster[str]
        self._scripts: dict[str, Any] = {}
        self._slots: SlotSteps | None = None  # on Redis Cluster
        self._stop = trio.Event()
        self._stopped = trio.Event()

    def __repr__(self) -> str:
        return f"RedisTaskStore({self.url!r}, instance={self.instance!r})"

    # --- calls -------------------------------------------------------------------------

    async def _do(self, call: Callable[[Any], Awaitable[T]]) -> T:
        await leave_reader()  # every call waits on Redis (see TaskStore)
        client = self._client
        if client is None or self._stopped.is_set():
            raise store_unavailable("the Redis store is not open")
        try:
            with trio.fail_after(self.op_timeout):
                return await call(client)
        except trio.TooSlowError:
            raise store_unavailable(f"Redis did not answer within {self.op_timeout:g} s") from None
        except Exception as exc:
            reason = unavailable_reason(exc)
            if reason is None:
                raise
            raise store_unavailable(reason) from exc

    async def _script(self, name: str, *args: str | int, route: str | None = None) -> Any:
        """Run script ``name``; on Redis Cluster ``route`` (a key it touches) picks the node."""
        script = self._scripts[name]
        keys = [route] if self.cluster and route is not None else None
        return await self._do(lambda _: script(keys=keys, args=[self.prefix, *args]))

    async def _steps(self, call: Callable[[SlotSteps, Any], Awaitable[T]]) -> T:
        """Run a Redis Cluster operation of several single-slot steps (as one call)."""
        slots = self._slots
        assert slots is not None
        return await self._do(lambda client: call(slots, client))

    # --- lifecycle ---------------------------------------------------------------------

    async def open(self) -> Opened:
        """Connect, load the scripts, take the lease, check Redis's settings.

        Returns:
            The cursor secret every process shares (no records: they are read here).

        Raises:
            McpError: Redis cannot be reached (:func:`~._shared.store_unavailable`).
        """
        if self._client is not None:
            raise RuntimeError(f"{self!r} is already open")
        client: Any
        if self.cluster:
            first, nodes = cluster_nodes(self._client_url)
            client = coredis.RedisCluster.from_url(
                first, decode_responses=True, retry_policy=NoRetryPolicy(), startup_nodes=nodes
            )
        else:
            client = coredis.Redis.from_url(
                self._client_url, decode_responses=True, retry_policy=NoRetryPolicy()
            )
        closing_connections(client)
        self._stop, self._stopped, ready = trio.Event(), trio.Event(), trio.Event()
        trio.lowlevel.spawn_system_task(
            hold_client, client, ready, self._stop, self._stopped, name=f"{self!r} pool"
        )
        await ready.wait()
        self._client = client
        sources = _CLUSTER_SCRIPTS if self.cluster else _SCRIPTS
        try:
            self._scripts = {name: client.register_script(src) for name, src in sources.items()}
            for src in sources.values():
                await self._do(lambda c, src=src: c.script_load(src))  # type: ignore[misc]
            if self.cluster:
                self._slots = SlotSteps(self._keys, self.instance, self._lease_ms, self._scripts)
            await self.renew_lease()
            secret = await self._script("secret", secrets.token_hex(16), route=self._keys.secret)
            await self._check_config()
        except BaseException:
            await self._release_client()
            raise
        log.info("%r: open (lease %g s)", self, self.lease_seconds)
        return Opened(bytes.fromhex(str(secret)))

    async def _check_config(self) -> None:
        try:
            config = await self._do(self._config)
        except RedisError as exc:
            log.warning(
                "%r: could not check Redis's maxmemory-policy and appendonly (%s): tasks are"
                " lost if Redis evicts keys or restarts without persistence", self, exc,
            )  # fmt: skip
            return
        policy = config.get("maxmemory-policy")
        if policy != "noeviction":
            log.warning(
                "%r: Redis's maxmemory-policy is %r, not 'noeviction': under memory pressure"
                " Redis may evict task records (they would vanish)", self, policy,
            )  # fmt: skip
        if config.get("appendonly") == "no":
            log.warning(
                "%r: Redis's appendonly is 'no': task results would not survive a Redis restart",
                self,
            )

    @staticmethod
    async def _config(client: Any) -> dict[str, str]:
        """Redis's maxmemory-policy and appendonly (on Redis Cluster: of the first primary
        that is not set as the store needs, else of the first)."""
        names = ["maxmemory-policy", "appendonly"]
        if not isinstance(client, coredis.RedisCluster):
            return dict(await client.config_get(names))
        found: list[dict[str, str]] = []
        for node in client.primaries:  # CONFIG GET is not routed: ask each primary
            async with node:
                found.append(dict(await node.config_get(names)))
        unsafe = [c for c in found if c.get("maxmemory-policy") != "noeviction"]
        unsafe += [c for c in found if c.get("appendonly") == "no"]
        return (unsafe or found)[0]

    async def aclose(self) -> None:
        """Fail this process's still-running tasks, release the lease, disconnect."""
        if self._client is None:
            return
        try:
            with trio.CancelScope(shield=True):
                failed, _ = await self.sweep(self.instance)
            if failed:
                log.warning("%r: closing: %d running task(s) failed", self, failed)
        except Exception as exc:  # Redis is down: the lease lapses on its own
            log.warning("%r: could not release the lease: %s", self, exc)
        finally:
            await self._release_client()

    async def _release_client(self) -> None:
        self._stop.set()
        with trio.CancelScope(shield=True):
            await self._stopped.wait()
        self._client = None

    async def run(
        self, events: StoreEvents, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Until cancelled: deliver hints to ``events.on_hint``, renew the lease every
        lease/3 s, sweep dead instances' tasks (queue the re-runnable ones, fail the others) every
        min(lease/2, hint) s. Survives Redis outages
        (reconnects with backoff). Reports started once subscribed (or once the first
        subscription attempt failed: hints then wait for Redis, the rest goes on)."""
        client = self._client
        if client is None:
            raise RuntimeError(f"{self!r} is not open")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(repeat, self, "renew the lease", self.lease_seconds / 3,
                               self._keep_lease)  # fmt: skip
            nursery.start_soon(repeat, self, "sweep dead instances",
                               min(self.lease_seconds / 2, self.hint_seconds),
                               self.sweep)  # fmt: skip
            await listen(self, client, self._keys.hints, events, task_status)

    async def _keep_lease(self) -> None:
        if not await self.renew_lease():
            log.warning(
                "%r: our lease had lapsed (Redis unreachable for over %g s?): other processes"
                " may have failed the tasks we run", self, self.lease_seconds,
            )  # fmt: skip

    async def renew_lease(self) -> bool:
        """Take or renew this process's lease; False if it had lapsed (or is new)."""
        started = trio.current_time()
        if self._slots is not None:
            held = await self._steps(lambda steps, c: steps.renew(c))
        else:
            held = bool(await self._script("renew", self.instance, self._lease_ms))
        self.lease.renewed(started)
        return held

    async def sweep(self, instance: str = "") -> tuple[int, list[str]]:
        """The running tasks of dead instances (or of ``instance``, releasing its
        lease): re-runnable ones queued to run again (or failed after their last
        attempt), the others failed with :data:`~._shared.LEASE_LOST_MESSAGE`.

        Returns:
            How many tasks failed, and which instances were found dead.
        """
        if self._slots is not None:
            now = _now_ms()
            failed, dead, queued = await self._steps(
                lambda steps, c: steps.sweep(c, LEASE_LOST_MESSAGE, now_iso(), instance, now)
            )
        else:
            failed, dead, queued = await self._script(
                "rescue", LEASE_LOST_MESSAGE, now_iso(), instance, str(_now_ms())
            )
        if (failed or queued) and not instance:
            log.warning(
                "%r: instance(s) %s stopped: %d task(s) failed, %d queued to run again",
                self, dead, failed, queued,
            )  # fmt: skip
        return int(failed), [str(d) for d in dead]

    # --- handing tasks between processes (RerunStore) ------------------------------------

    async def requeue(
        self,
        task_ids: Collection[str],
        *,
        count: bool,
        spend: bool = True,
        message: str | None = None,
    ) -> int:
        """Queue these live re-runnable tasks of this process again (see
        :class:`~._rerun.RerunStore`); how many workers are alive."""
        if self._slots is not None:
            ids, now, updated = list(task_ids), _now_ms(), now_iso()
            return await self._steps(
                lambda steps, c: steps.requeue(c, ids, count, spend, message, updated, now)
            )
        workers = await self._script(
            "requeue", self.instance, "1" if count else "0", "1" if spend else "0",
            message or "", now_iso(),
            str(_now_ms()), *task_ids,
        )  # fmt: skip
        return int(workers)

    async def claim(self, tools: Collection[str], limit: int) -> list[TaskRecord]:
        """Take up to ``limit`` due queued tasks of ``tools``, atomically."""
        if not tools:
            return []
        if self._slots is not None:
            names, now = sorted(tools), _now_ms()
            found = await self._steps(lambda steps, c: steps.claim(c, names, limit, now))
            taken = [_record(task_id, h) for task_id, h in found]
            return [r for r in taken if r is not None]
        flat = await self._script(
            "claim", self.instance, self._lease_ms, str(_now_ms()), str(limit), *tools
        )
        records = [_record(str(flat[i]), _pairs(flat[i + 1])) for i in range(0, len(flat), 2)]
        return [r for r in records if r is not None]

    async def set_worker(self, worker: bool) -> None:
        """Count this process as a live worker (it claims queued work), or not."""
        if self._slots is not None:
            key, me = self._keys.workers, [self.instance]
            await self._do(lambda c: c.sadd(key, me) if worker else c.srem(key, me))
            return
        await self._script("set_worker", self.instance, "1" if worker else "0")

    # --- records -----------------------------------------------------------------------

    async def sync(self) -> None:
        """Nothing to wait for: each operation is durable in the store when it returns."""

    async def create(self, record: TaskRecord, *, max_live: int) -> int:
        """Store a new record run by this process; return its global seq.

        Raises:
            CapReached: ``record.owner`` has ``max_live`` live tasks.
            ValueError: A task with this id exists.
        """
        if self._slots is not None:
            [result] = await self.create_many([record], max_live=max_live)
            if isinstance(result, Exception):
                raise result
            return result
        seq = int(await self._script("create", *_create_args(self, record, max_live, _now_ms())))
        return _created(record, max_live, seq)

    async def create_many(
        self, records: Sequence[TaskRecord], *, max_live: int
    ) -> list[int | Exception]:
        """:meth:`create` for each record, in order, in one round trip (one script).

        Returns:
            Each record's seq, or the :class:`CapReached` or :class:`ValueError`
            it would have raised.
        """
        now = _now_ms()
        answers: list[Any]
        if self._slots is not None:
            creates = [_create_args(self, record, max_live, now) for record in records]
            answers = await self._steps(
                lambda steps, c: steps.create_many(c, creates, max_live, now)
            )
        else:
            rows = [_create_args(self, record, max_live, now) for record in records]
            answers = await self._script("create_many", _json_rows(rows))
        out: list[int | Exception] = []
        for record, seq in zip(records, answers, strict=True):
            try:
                out.append(_created(record, max_live, int(seq)))
            except (CapReached, ValueError) as exc:
                out.append(exc)
        return out

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or ``None`` if unknown or expired."""
        key = self._keys.task(task_id)
        h = await self._do(lambda c: c.hgetall(key))
        return _record(task_id, dict(h)) if h else None

    async def page(self, owner: str, after_seq: int, limit: int) -> tuple[list[TaskRecord], bool]:
        """Up to ``limit`` live records of ``owner`` with ``seq > after_seq``, oldest first,
        and whether more remain."""
        if self._slots is not None:
            now = _now_ms()
            found, more = await self._steps(
                lambda steps, c: steps.page(c, owner, after_seq, limit, now)
            )
            records = [_record(task_id, h) for task_id, h in found]
            return [r for r in records if r is not None], more
        more, flat = await self._script("page", owner, str(after_seq), str(limit), str(_now_ms()))
        records = [_record(str(flat[i]), _pairs(flat[i + 1])) for i in range(0, len(flat), 2)]
        return [r for r in records if r is not None], bool(more)

    async def update(self, record: TaskRecord) -> bool:
        """Compare and set status, message, updated and outcome while non-terminal."""
        if self._slots is not None:
            [applied] = await self.update_many([record])
            return applied
        applied = await self._script("update", *_update_args(record, _now_ms()))
        return bool(applied)

    async def update_many(self, records: Sequence[TaskRecord]) -> list[bool]:
        """:meth:`update` for each record, in order, in one round trip (one script)."""
        now = _now_ms()
        updates = [_update_args(record, now) for record in records]
        if self._slots is not None:
            return await self._steps(lambda steps, c: steps.update_many(c, updates))
        applied = await self._script("update_many", _json_rows(updates))
        return [bool(one) for one in applied]

    async def cancel(self, task_id: str, message: str, updated_at: str) -> TaskRecord | None:
        """Move a non-terminal task to ``cancelled``; return the record after."""
        now = str(_now_ms())
        if self._slots is not None:
            flat = await self._steps(
                lambda steps, c: steps.cancel(c, task_id, message, updated_at, now)
            )
        else:
            flat = await self._script("cancel", task_id, message, updated_at, now)
        return None if not flat else _record(task_id, _pairs(flat))

    async def delete(self, task_id: str) -> None:
        """Forget a record, its input queue and answers."""
        if self._slots is not None:
            await self._steps(lambda steps, c: steps.delete(c, task_id))
            return
        await self._script("delete", task_id)

    async def terminal_among(self, task_ids: Collection[str]) -> set[str]:
        """Which of these ids are terminal, expired or gone."""
        if not task_ids:
            return set()
        if self._slots is not None:
            ids, now = list(task_ids), _now_ms()
            return await self._steps(lambda steps, c: steps.terminal_among(c, ids, now))
        found = await self._script("terminal_among", str(_now_ms()), *task_ids)
        return {str(t) for t in found}

    # --- the input_required side channel -------------------------------------------------

    async def push_input(self, task_id: str, item: InputItem) -> None:
        """Queue a side-channel request of the task (dropped if the task is gone)."""
        await self._script(
            "push_input", task_id, _encode_item(item), "0", route=self._keys.task(task_id)
        )

    async def claim_input(self, task_id: str, key: str | None = None) -> InputItem | None:
        """Take the oldest queued request (or the one with ``key``), atomically."""
        head = "" if key is None else _item_head(key)
        text = await self._script("claim_input", task_id, head, route=self._keys.task(task_id))
        return None if text is None else _decode_item(str(text))

    async def peek_inputs(self, task_id: str) -> list[InputItem]:
        """The queued requests of the task, oldest first, left in the queue."""
        found = await self._script("peek_inputs", task_id, route=self._keys.task(task_id))
        return [_decode_item(str(t)) for t in found or ()]

    async def requeue_input(self, task_id: str, item: InputItem) -> None:
        """Put a claimed request back at the head of the queue."""
        await self._script(
            "push_input", task_id, _encode_item(item), "1", route=self._keys.task(task_id)
        )

    async def answer_input(self, task_id: str, key: str, answer: InputAnswer) -> None:
        """Store the answer to request ``key`` (dropped if the task is gone)."""
        body = {"error": answer.error} if answer.error is not None else {"result": answer.result}
        await self._script(
            "answer_input", task_id, key, json.dumps(body, ensure_ascii=False),
            route=self._keys.task(task_id),
        )  # fmt: skip

    async def take_answer(self, task_id: str, key: str) -> InputAnswer | None:
        """Remove and return the answer to request ``key``, if there is one."""
        text = await self._script("take_answer", task_id, key, route=self._keys.task(task_id))
        if text is None:
            return None
        body = json.loads(str(text))
        return InputAnswer(result=body.get("result"), error=body.get("error"))


if TYPE_CHECKING:

    def _conforms(store: RedisTaskStore) -> TaskStore:
        return store  # mypy checks the class against the protocol


def _create_args(
    store: RedisTaskStore, record: TaskRecord, max_live: int, now_ms: int
) -> list[str]:
    """The CREATE script's arguments after the prefix."""
    wall = wall_expiry(record.deadline)
    expires = None if wall is None else round(wall * 1000)
    fields: list[str] = ["method", record.method, "updated", record.last_updated_at,
                         "poll", str(record.poll_interval)]  # fmt: skip
    if record.ttl is not None:
        fields += ["ttl", str(record.ttl)]
    if expires is not None:
        fields += ["expires", str(expires)]
    if record.status_message is not None:
        fields += ["msg", record.status_message]
    if (outcome := outcome_to_json(record.outcome)) is not None:
        fields += ["outcome", outcome]
    if (ticket := record.rerun) is not None:
        fields += ["tool", ticket.tool, "attempts", str(ticket.attempts),
                   "backoff", str(round(ticket.backoff * 1000)), "job", ticket.request,
                   "attempt", str(record.attempt)]  # fmt: skip
    at = "" if expires is None else str(expires + EXPIRY_MARGIN_MS)
    return [
        record.task_id, record.owner, store.instance, record.status.value, record.created_at,
        str(max_live), str(now_ms), at, store._lease_ms, *fields,
    ]  # fmt: skip


def _created(record: TaskRecord, max_live: int, seq: int) -> int:
    """The CREATE script's answer: the seq, or why it refused."""
    if seq == -1:
        raise CapReached(f"{record.owner!r} has {max_live} live tasks")
    if seq == -2:
        raise ValueError(f"task {record.task_id!r} exists")
    return seq


#: The ``*_MANY`` scripts' records: one argument, not one per field (coredis spends
#: about a microsecond on each argument of a command; ``cjson`` reads this in C).
_json_rows: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _update_args(record: TaskRecord, now_ms: int) -> list[str]:
    msg, outcome = record.status_message, outcome_to_json(record.outcome)
    return [
        record.task_id, record.status.value, record.last_updated_at,
        "0" if msg is None else "1", msg or "", "0" if outcome is None else "1",
        outcome or "", str(now_ms),
    ]  # fmt: skip

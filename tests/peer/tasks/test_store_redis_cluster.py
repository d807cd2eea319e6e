"""The Redis task store on a real, private three-master Redis Cluster: what only the
cluster adds (the store contract, ``test_store_redis.py`` and the cluster tests run on it
too).

The URL names the nodes; a task's keys share one hash tag and so one slot, and the tasks
of one owner spread over every master; what a process leaves half done between two
single-slot steps when it dies is healed by the others. On a standalone Redis the key
names stay those of earlier releases.
"""

from __future__ import annotations

import time
from typing import Any

import attrs
import pytest
import trio

from trio_mcp import McpError
from trio_mcp.peer._messages import TaskStatus
from trio_mcp.peer._tasks._shared import LEASE_LOST_MESSAGE
from trio_mcp.peer._tasks._store import CapReached, InputAnswer, InputItem

from tests.redis_cluster import (
    RedisCluster,
    cluster_store_url,
    require_redis_cluster,
    running_redis_cluster,
)
from tests.redis_server import require_redis
from tests.shared_store_support import opened
from tests.shared_store_support import record as _record


def _store(url: str, **kwargs: Any) -> Any:
    from trio_mcp.peer._tasks._redis import RedisTaskStore

    return RedisTaskStore(url, **kwargs)


def test_redis_cluster_url_names_the_nodes_and_takes_the_redis_options() -> None:
    require_redis()
    from trio_mcp.peer._tasks._open import open_task_store
    from trio_mcp.peer._tasks._redis_loops import cluster_nodes

    store = open_task_store(
        "redis+cluster://10.0.0.1:7000,10.0.0.2:7001/?lease=1.5&prefix=app&hint=0.2"
    )
    assert store.cluster and store.shared
    assert (store.lease_seconds, store.hint_seconds, store.prefix) == (1.5, 0.2, "app")
    assert not open_task_store("redis://localhost:6379/0").cluster
    first, nodes = cluster_nodes("rediss+cluster://u:pw@a:1,b:2,[::1]:3?ssl_cert_reqs=none")
    assert first == "rediss://u:pw@a:1?ssl_cert_reqs=none"
    assert [(n.host, n.port) for n in nodes] == [("a", 1), ("b", 2), ("::1", 3)]
    for bad in ("redis+cluster://", "redis+cluster://a:1,b", "redis+cluster://a:x"):
        with pytest.raises(ValueError, match="host:port"):
            cluster_nodes(bad)
    assert cluster_nodes("redis+cluster://a:1/0")[0] == "redis://a:1"
    with pytest.raises(ValueError, match="one database"):
        cluster_nodes("redis+cluster://a:1/2")


async def _slot(client: Any, key: str) -> int:
    return int(await client.cluster_keyslot(key))


async def test_redis_cluster_one_slot_per_task_and_every_master_holds_tasks(
    redis_cluster: RedisCluster,
) -> None:
    url = cluster_store_url(redis_cluster)
    async with opened(_store(url), run=False) as (store, _):
        ids = [f"task-{i}" for i in range(60)]
        for task_id in ids:
            await store.create(_record(task_id), max_live=100)
            await store.push_input(task_id, InputItem("1", "elicitation/create", {}))
            await store.answer_input(task_id, "2", InputAnswer(result={"ok": True}))
        client, keys = store._client, store._keys
        for task_id in ids:  # a task's keys: one slot
            slots = {await _slot(client, k) for k in
                     (keys.task(task_id), keys.inputs(task_id), keys.answers(task_id))}  # fmt: skip
            assert len(slots) == 1
        # an owner's keys, an instance's keys: one slot each
        assert await _slot(client, keys.index("alice")) == await _slot(client, keys.live("alice"))
        assert await _slot(client, keys.runs(store.instance)) == await _slot(
            client, keys.lease(store.instance)
        )
        page, more = await store.page("alice", 0, 100)
        assert [r.task_id for r in page] == ids and not more
        # the scripts name the keys as RedisKeys does
        assert await client.exists([keys.inputs(ids[0]), keys.answers(ids[0])]) == 2
    # the tasks of one owner spread over the three masters (each holds some hashes)
    held = [
        {k for k in await redis_cluster.keys_on(port, f"{store.prefix}:{{t:*}}") if "}:" not in k}
        for port in redis_cluster.ports
    ]
    assert all(held) and sum(map(len, held)) == 60
    assert set().union(*held) == {keys.task(t) for t in ids}


async def test_redis_cluster_heals_what_a_process_left_between_two_steps(
    redis_cluster: RedisCluster,
) -> None:
    url = cluster_store_url(redis_cluster)
    async with opened(_store(url, lease_seconds=1.0)) as (a, a_hints):
        client, keys = a._client, a._keys
        # a task that turned terminal whose process stopped before leaving the live set
        await a.create(_record("done"), max_live=2)
        await a.create(_record("running"), max_live=2)
        await client.hset(keys.task("done"), {"status": "completed"})
        assert await client.sismember(keys.live("alice"), "done")
        await a.create(_record("third"), max_live=2)  # at the cap: the live set is healed
        assert not await client.sismember(keys.live("alice"), "done")
        with pytest.raises(CapReached):
            await a.create(_record("fourth"), max_live=2)
        # a terminal write whose answer was lost (its next steps not done) sent again:
        # applied once, and the next steps done this time
        third = await a.get("third")
        finished = attrs.evolve(third, status=TaskStatus.COMPLETED, outcome={"content": []})
        assert await a.update(finished) is True
        await client.sadd(keys.live("alice"), ["third"])
        await client.sadd(keys.runs(a.instance), ["third"])
        assert await a.update(finished) is True
        assert not await client.sismember(keys.live("alice"), "third")
        assert not await client.sismember(keys.runs(a.instance), "third")

        # b dies between the steps of two creates: "b-ghost" enlisted in its runs set
        # (step 1) with no hash yet, "b-half" enlisted and written (step 2), not admitted
        b = _store(url, lease_seconds=1.0)
        await b.open()
        await b.create(_record("b-full"), max_live=10)
        await client.sadd(keys.runs(b.instance), ["b-ghost", "b-half"])
        half = _record("b-half")
        from trio_mcp.peer._tasks._redis import _create_args

        await b._script(
            "c_create", "999", *_create_args(b, half, 10, int(time.time() * 1000)),
            route=keys.task("b-half"),
        )  # fmt: skip
        await b._release_client()  # no aclose: its lease lapses
        await a_hints.wait_for(("status", "b-half"), timeout=5.0)
        await a_hints.wait_for(("status", "b-full"), timeout=5.0)
        for task_id in ("b-full", "b-half"):
            lost = await a.get(task_id)
            assert (lost.status, lost.status_message) == (TaskStatus.FAILED, LEASE_LOST_MESSAGE)
        with trio.fail_after(5):  # then its runs set is emptied and it leaves the list
            while await client.exists([keys.runs(b.instance)]) or (  # noqa: ASYNC110
                b.instance in await client.smembers(keys.instances)
            ):
                await trio.sleep(0.05)
        assert await a.get("b-ghost") is None
        assert not await client.sismember(keys.live("alice"), "b-full")


async def test_redis_cluster_writes_of_one_task_in_one_batch_apply_in_order(
    redis_cluster: RedisCluster,
) -> None:
    async with opened(_store(cluster_store_url(redis_cluster)), run=False) as (store, _):
        first = _record("one")
        first.seq = await store.create(first, max_live=10)
        other = _record("other")
        other.seq = await store.create(other, max_live=10)
        steps = []
        for i in range(30):
            status = TaskStatus.INPUT_REQUIRED if i % 2 else TaskStatus.WORKING
            steps.append(attrs.evolve(first, status=status, status_message=f"step {i}"))
            steps.append(attrs.evolve(other, status_message=f"step {i}"))
        steps.append(attrs.evolve(first, status=TaskStatus.WORKING, status_message="last"))
        assert await store.update_many(steps) == [True] * len(steps)
        got = await store.get("one")
        assert (got.status, got.status_message) == (TaskStatus.WORKING, "last")
        assert (await store.get("other")).status_message == "step 29"


async def test_redis_standalone_key_names_are_those_of_earlier_releases(redis_url: str) -> None:
    async with opened(_store(redis_url), run=False) as (store, _):
        await store.create(_record("x"), max_live=10)
        await store.push_input("x", InputItem("1", "elicitation/create", {}))
        await store.answer_input("x", "2", InputAnswer(result={}))
        found = {k async for k in store._client.scan_iter(match="*")}
    p, me = store.prefix, store.instance
    assert found == {f"{p}:t:x", f"{p}:in:x", f"{p}:ans:x", f"{p}:o:alice", f"{p}:live:alice",
                     f"{p}:seq", f"{p}:instances", f"{p}:lease:{me}", f"{p}:runs:{me}",
                     f"{p}:secret"}  # fmt: skip


@pytest.mark.slow  # restarts or reshards the cluster: -m slow
async def test_redis_cluster_master_down_is_a_clear_error_for_its_slots_only(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    require_redis_cluster()
    with running_redis_cluster(tmp_path_factory.mktemp("rcl")) as cluster:
        url = cluster_store_url(cluster)
        async with opened(_store(url, lease_seconds=30.0)) as (store, _):
            store.op_timeout = 2.0
            ids = [f"t-{i}" for i in range(30)]
            for task_id in ids:
                await store.create(_record(task_id), max_live=100)
            down_port = cluster.ports[0]
            on_down = set(
                k.removeprefix(f"{store.prefix}:{{t:").removesuffix("}")
                for k in await cluster.keys_on(down_port, f"{store.prefix}:{{t:*}}")
            )
            assert on_down and on_down < set(ids)
            cluster.kill_node(0)
            for task_id in ids:
                if task_id in on_down:
                    with pytest.raises(McpError, match="Task store unavailable"):
                        await store.get(task_id)
                else:  # the other masters still serve their tasks
                    assert (await store.get(task_id)).status is TaskStatus.WORKING
            cluster.start_node(0)  # appendonly: what it had is back
            with trio.fail_after(10):
                while True:
                    try:
                        got = [await store.get(t) for t in ids]
                        break
                    except McpError:
                        await trio.sleep(0.1)
            assert [r.task_id for r in got] == ids
            # the restarted master lost the scripts (not persisted): loaded again
            back = [r for r in got if r.task_id in on_down]
            done = [attrs.evolve(r, status=TaskStatus.COMPLETED) for r in back]
            assert await store.update(done[0]) is True
            assert await store.update_many(done[1:]) == [True] * (len(done) - 1)
            page, _ = await store.page("alice", 0, 100)
            assert {r.task_id for r in page if r.status is TaskStatus.COMPLETED} == on_down


def test_redis_cluster_errors_that_mean_unavailable() -> None:
    require_redis()
    from coredis.exceptions import ClusterDownError, ClusterError, ResponseError, TryAgainError

    from trio_mcp.peer._tasks._redis_loops import unavailable_reason

    for exc in (ClusterDownError("CLUSTERDOWN The cluster is down"),
                ClusterError("TTL exhausted"), TryAgainError("TRYAGAIN"),
                ResponseError("CLUSTERDOWN Hash slot not served")):  # fmt: skip
        assert unavailable_reason(exc) is not None, exc
    assert unavailable_reason(ResponseError("ERR wrong number of arguments")) is None


@pytest.mark.slow  # restarts or reshards the cluster: -m slow
async def test_redis_cluster_store_follows_slots_that_move(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    require_redis_cluster()
    with running_redis_cluster(tmp_path_factory.mktemp("rcl")) as cluster:
        async with opened(_store(cluster_store_url(cluster))) as (store, _):
            made = []
            for i in range(100):
                rec = _record(f"t-{i}")
                rec.seq = await store.create(rec, max_live=1000)
                made.append(rec)
            pattern = f"{store.prefix}:{{t:*}}"
            before = set(await cluster.keys_on(cluster.ports[1], pattern))
            await trio.to_thread.run_sync(cluster.move_slots, 0, 1, 3000)
            assert set(await cluster.keys_on(cluster.ports[1], pattern)) > before  # some moved
            assert all([await store.get(r.task_id) for r in made])
            done = [attrs.evolve(r, status=TaskStatus.COMPLETED) for r in made]
            assert await store.update_many(done) == [True] * 100
            page, more = await store.page("alice", 0, 200)
            assert [r.status for r in page] == [TaskStatus.COMPLETED] * 100 and not more

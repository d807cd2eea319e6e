"""The Lua scripts of :class:`~._redis.RedisTaskStore`: one atomic round trip each, and
:class:`RedisKeys`, the one place that names the keys (in Python and in the scripts).

Every script takes the key prefix as ``ARGV[1]``. On a standalone Redis (or one
primary) a script builds its keys from it (see the key layout in :mod:`._redis`) and
may touch a task's keys, its owner's and its runner's at once. On Redis Cluster a
script touches one slot: the scripts of one task (its hash, input queue, answers:
one hash tag) run as they are with the cluster's key functions (:func:`for_cluster`);
what spans a task, its owner and its runner is done in single-slot steps by
:class:`~._redis_cluster.SlotSteps` with the ``C_*`` scripts below, which take
every key they touch in ``KEYS``. A record's ``outcome`` is passed through as an
opaque string: no script decodes its JSON (``cjson`` would round numbers). The
``*_MANY`` scripts take their records' arguments as one JSON array of arrays of
strings (``cjson`` gives each string back byte for byte).
"""

from __future__ import annotations

from typing import Final, final

import attrs


@final
@attrs.frozen
class RedisKeys:
    """The names of the store's keys under ``prefix``, standalone or on Redis Cluster.

    Standalone (``cluster=False``) the names are those of every earlier release.
    On Redis Cluster each group of keys one script touches shares a hash tag: a
    task's keys ``{t:ID}``, an owner's ``{o:OWNER}``, an instance's ``{i:INSTANCE}``
    (a letter first, so the tag is never empty, whatever the id). The sequence, the
    instance set and the secret are keys of their own; the hints channel is one
    (cluster-wide) pub/sub channel.
    """

    prefix: str
    cluster: bool = False

    def task(self, task_id: str) -> str:
        """The task's HASH."""
        p = self.prefix
        return f"{p}:{{t:{task_id}}}" if self.cluster else f"{p}:t:{task_id}"

    def inputs(self, task_id: str) -> str:
        """The task's LIST of queued input requests."""
        p = self.prefix
        return f"{p}:{{t:{task_id}}}:in" if self.cluster else f"{p}:in:{task_id}"

    def answers(self, task_id: str) -> str:
        """The task's HASH of answers to its input requests."""
        p = self.prefix
        return f"{p}:{{t:{task_id}}}:ans" if self.cluster else f"{p}:ans:{task_id}"

    def index(self, owner: str) -> str:
        """The owner's ZSET of task ids by seq (``tasks/list``)."""
        p = self.prefix
        return f"{p}:{{o:{owner}}}:tasks" if self.cluster else f"{p}:o:{owner}"

    def live(self, owner: str) -> str:
        """The owner's SET of non-terminal task ids (the live cap)."""
        p = self.prefix
        return f"{p}:{{o:{owner}}}:live" if self.cluster else f"{p}:live:{owner}"

    def runs(self, instance: str) -> str:
        """The instance's SET of the non-terminal task ids it runs."""
        p = self.prefix
        return f"{p}:{{i:{instance}}}:runs" if self.cluster else f"{p}:runs:{instance}"

    def lease(self, instance: str) -> str:
        """The instance's lease (present while it lives)."""
        p = self.prefix
        return f"{p}:{{i:{instance}}}:lease" if self.cluster else f"{p}:lease:{instance}"

    @property
    def seq(self) -> str:
        """The global sequence counter."""
        return f"{self.prefix}:seq"

    @property
    def instances(self) -> str:
        """The SET of instances that took a lease."""
        return f"{self.prefix}:instances"

    @property
    def queue(self) -> str:
        """The ZSET of queued re-runnable task ids by the epoch ms they are due."""
        return f"{self.prefix}:queue"

    @property
    def workers(self) -> str:
        """The SET of instances that run queued task work."""
        return f"{self.prefix}:workers"

    @property
    def secret(self) -> str:
        """The shared cursor secret."""
        return f"{self.prefix}:secret"

    @property
    def hints(self) -> str:
        """The hints pub/sub channel."""
        return f"{self.prefix}:hints"


_TERMINAL: Final = """
local TERMINAL = {completed = true, failed = true, cancelled = true}
local P = ARGV[1]
"""

#: The scripts' key functions, standalone (as :class:`RedisKeys` with ``cluster=False``).
_KEYS: Final = """
local function tkey(id) return P .. ':t:' .. id end
local function qkey(id) return P .. ':in:' .. id end
local function akey(id) return P .. ':ans:' .. id end
"""

#: The same on Redis Cluster (as :class:`RedisKeys` with ``cluster=True``).
_CLUSTER_KEYS: Final = """
local function tkey(id) return P .. ':{t:' .. id .. '}' end
local function qkey(id) return tkey(id) .. ':in' end
local function akey(id) return tkey(id) .. ':ans' end
"""

_GONE: Final = """
local function gone(expires, now)
  return expires and tonumber(expires) <= now
end
"""

_PRELUDE: Final = (
    _TERMINAL
    + _KEYS
    + """
local function finish(id, owner, runner)
  redis.call('SREM', P .. ':live:' .. owner, id)
  if runner then redis.call('SREM', P .. ':runs:' .. runner, id) end
end
"""
    + _GONE
)

#: On Redis Cluster a task's script cannot reach its owner's and runner's sets (other
#: slots): ``finish`` notes them in ``FINISHED`` for the caller's next steps.
_CLUSTER_PRELUDE: Final = (
    _TERMINAL
    + _CLUSTER_KEYS
    + """
local FINISHED = {}
local function finish(id, owner, runner)
  FINISHED[1], FINISHED[2] = owner, runner or false
end
"""
    + _GONE
)


def for_cluster(script: str) -> str:
    """A script of one task's keys (built on the standalone prelude) for Redis Cluster."""
    if not script.startswith(_PRELUDE):
        raise ValueError("not a script on the standalone prelude")
    return _CLUSTER_PRELUDE + script[len(_PRELUDE) :]


_CREATE_ONE: Final = """
local function create(a)
  local id, owner, runner, status = a[1], a[2], a[3], a[4]
  local max_live, now, at = tonumber(a[6]), tonumber(a[7]), tonumber(a[8])
  local key = tkey(id)
  local old = redis.call('HMGET', key, 'runner', 'created', 'seq')
  if old[1] then
    -- the same create retried after a lost reply: answer it again
    if old[1] == runner and old[2] == a[5] then return tonumber(old[3]) end
    return -2
  end
  local live = P .. ':live:' .. owner
  local running = not TERMINAL[status]
  if running and redis.call('SCARD', live) >= max_live then
    -- heal the set: drop members that are gone or terminal
    for _, other in ipairs(redis.call('SMEMBERS', live)) do
      local st = redis.call('HGET', tkey(other), 'status')
      if (not st) or TERMINAL[st] then redis.call('SREM', live, other) end
    end
    if redis.call('SCARD', live) >= max_live then return -1 end
  end
  local seq = redis.call('INCR', P .. ':seq')
  redis.call('HSET', key, 'seq', seq, 'owner', owner, 'runner', runner, 'status', status,
    'created', a[5], unpack(a, 10))
  local index = P .. ':o:' .. owner
  local left = redis.call('PTTL', index)
  redis.call('ZADD', index, seq, id)
  if at then
    redis.call('PEXPIREAT', key, at)
    if left == -2 or (left >= 0 and now + left < at) then redis.call('PEXPIREAT', index, at) end
  else
    redis.call('PERSIST', index)
  end
  if running then
    redis.call('SADD', live, id)
    redis.call('SADD', P .. ':runs:' .. runner, id)
    redis.call('SADD', P .. ':instances', runner)
    redis.call('SET', P .. ':lease:' .. runner, '1', 'PX', a[9], 'NX')
  end
  return seq
end
"""

#: ARGV: P, id, owner, runner, status, created, max_live, now_ms, expire_at_ms|'',
#: lease_ms, then field/value pairs. Returns the seq, -1 (cap reached) or -2 (id
#: taken). The runner is (re)registered, its lease re-taken if it had lapsed, so a
#: task is never left in the runs set of an instance nobody sweeps.
CREATE: Final = _PRELUDE + _CREATE_ONE + "\nreturn create({unpack(ARGV, 2)})\n"

#: ARGV: P, then a JSON array holding, per record, the array of CREATE's arguments
#: after P (all strings). Returns each record's answer (as CREATE's), in order: many
#: creates, one round trip, and two arguments (a client's cost grows with each one).
CREATE_MANY: Final = (
    _PRELUDE
    + _CREATE_ONE
    + """
local out = {}
for _, a in ipairs(cjson.decode(ARGV[2])) do
  out[#out + 1] = create(a)
end
return out
"""
)

_UPDATE_ONE: Final = """
local function update(id, status, updated, has_msg, msg, has_outcome, outcome, now)
  local key = tkey(id)
  local cur = redis.call('HMGET', key, 'status', 'owner', 'runner', 'expires', 'updated')
  if (not cur[1]) or gone(cur[4], tonumber(now)) then return 0 end
  if TERMINAL[cur[1]] then
    if cur[1] == status and cur[5] == updated then return 1 end
    return 0
  end
  redis.call('HSET', key, 'status', status, 'updated', updated)
  if has_msg == '1' then
    redis.call('HSET', key, 'msg', msg)
  else
    redis.call('HDEL', key, 'msg')
  end
  if has_outcome == '1' then
    redis.call('HSET', key, 'outcome', outcome)
  else
    redis.call('HDEL', key, 'outcome')
  end
  if TERMINAL[status] then finish(id, cur[2], cur[3]) end
  redis.call('PUBLISH', P .. ':hints', 'status|' .. id)
  return 1
end
"""

#: ARGV: P, id, status, updated, has_msg, msg, has_outcome, outcome, now_ms.
#: Returns 1 if applied (or this very write was already applied), else 0.
UPDATE: Final = _PRELUDE + _UPDATE_ONE + "\nreturn update(unpack(ARGV, 2, 9))\n"

#: ARGV: P, then a JSON array holding, per record, the array of UPDATE's 8 arguments
#: after P (all strings). Returns each record's answer (as UPDATE's), in order: many
#: status writes, one round trip.
UPDATE_MANY: Final = (
    _PRELUDE
    + _UPDATE_ONE
    + """
local out = {}
for _, u in ipairs(cjson.decode(ARGV[2])) do
  out[#out + 1] = update(unpack(u, 1, 8))
end
return out
"""
)

#: ARGV: P, id, message, updated, now_ms. Returns the hash after (flat), or nil.
CANCEL: Final = (
    _PRELUDE
    + """
local id = ARGV[2]
local key = tkey(id)
local cur = redis.call('HMGET', key, 'status', 'owner', 'runner', 'expires')
if (not cur[1]) or gone(cur[4], tonumber(ARGV[5])) then return false end
if not TERMINAL[cur[1]] then
  redis.call('HSET', key, 'status', 'cancelled', 'msg', ARGV[3], 'updated', ARGV[4])
  finish(id, cur[2], cur[3])
  redis.call('PUBLISH', P .. ':hints', 'cancel|' .. id)
end
return redis.call('HGETALL', key)
"""
)

#: ARGV: P, id.
DELETE: Final = (
    _PRELUDE
    + """
local id = ARGV[2]
local key = tkey(id)
local cur = redis.call('HMGET', key, 'owner', 'runner')
redis.call('DEL', key, qkey(id), akey(id))
if cur[1] then
  redis.call('ZREM', P .. ':o:' .. cur[1], id)
  finish(id, cur[1], cur[2])
end
return 1
"""
)

#: ARGV: P, owner, after_seq, limit, now_ms. Returns {more, {id, hash, id, hash, ...}};
#: index entries of vanished records are removed on the way.
PAGE: Final = (
    _PRELUDE
    + """
local index = P .. ':o:' .. ARGV[2]
local limit, now = tonumber(ARGV[4]), tonumber(ARGV[5])
local cursor = '(' .. ARGV[3]
local out, n, more = {}, 0, 0
local batch = limit + 1
if batch < 16 then batch = 16 end
while more == 0 do
  local rows = redis.call('ZRANGEBYSCORE', index, cursor, '+inf', 'WITHSCORES', 'LIMIT', 0, batch)
  if #rows == 0 then break end
  for i = 1, #rows, 2 do
    local id = rows[i]
    local key = tkey(id)
    local meta = redis.call('HMGET', key, 'status', 'expires')
    if not meta[1] then
      redis.call('ZREM', index, id)
    elseif not gone(meta[2], now) then
      if n == limit then more = 1; break end
      n = n + 1
      out[#out + 1] = id
      out[#out + 1] = redis.call('HGETALL', key)
    end
  end
  cursor = '(' .. rows[#rows]
end
return {more, out}
"""
)

#: ARGV: P, now_ms, ids... Returns the ids that are terminal, gone or expired.
TERMINAL_AMONG: Final = (
    _PRELUDE
    + """
local now = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local m = redis.call('HMGET', tkey(ARGV[i]), 'status', 'expires')
  if (not m[1]) or TERMINAL[m[1]] or gone(m[2], now) then out[#out + 1] = ARGV[i] end
end
return out
"""
)

#: ARGV: P, id, element, front ('1': requeue at the head). Returns 0 if the task is gone.
PUSH_INPUT: Final = (
    _PRELUDE
    + """
local id = ARGV[2]
local left = redis.call('PTTL', tkey(id))
if left == -2 then return 0 end
local q = qkey(id)
if ARGV[4] == '1' then redis.call('LPUSH', q, ARGV[3]) else redis.call('RPUSH', q, ARGV[3]) end
if left > 0 then redis.call('PEXPIRE', q, left) end
redis.call('PUBLISH', P .. ':hints', 'input|' .. id)
return 1
"""
)

#: ARGV: P, id, head ('' for the oldest; else the element's key head). Returns it or nil.
CLAIM_INPUT: Final = (
    _PRELUDE
    + """
local q = qkey(ARGV[2])
local head = ARGV[3]
if head == '' then return redis.call('LPOP', q) end
for _, el in ipairs(redis.call('LRANGE', q, 0, -1)) do
  if string.sub(el, 1, #head) == head then
    redis.call('LREM', q, 1, el)
    return el
  end
end
return false
"""
)

#: ARGV: P, id, key, answer JSON. Returns 0 if the task is gone.
ANSWER_INPUT: Final = (
    _PRELUDE
    + """
local id = ARGV[2]
local left = redis.call('PTTL', tkey(id))
if left == -2 then return 0 end
local a = akey(id)
redis.call('HSET', a, ARGV[3], ARGV[4])
if left > 0 then redis.call('PEXPIRE', a, left) end
redis.call('PUBLISH', P .. ':hints', 'answer|' .. id)
return 1
"""
)

#: ARGV: P, id. Returns the queued input requests, oldest first (not removed).
PEEK_INPUTS: Final = (
    _PRELUDE
    + """
return redis.call('LRANGE', qkey(ARGV[2]), 0, -1)
"""
)

#: ARGV: P, id, key. Returns the answer JSON (now removed) or nil.
TAKE_ANSWER: Final = (
    _PRELUDE
    + """
local a = akey(ARGV[2])
local v = redis.call('HGET', a, ARGV[3])
if v then redis.call('HDEL', a, ARGV[3]) end
return v
"""
)

#: ARGV: P, instance, lease_ms. Returns 1 if the lease was still held, 0 if it
#: had lapsed (or is new).
RENEW_LEASE: Final = (
    _PRELUDE
    + """
local lease = P .. ':lease:' .. ARGV[2]
local had = redis.call('EXISTS', lease)
redis.call('SET', lease, '1', 'PX', ARGV[3])
redis.call('SADD', P .. ':instances', ARGV[2])
return had
"""
)

#: ARGV: P, candidate secret (hex). Returns the secret every process shares.
SECRET: Final = """
local k = ARGV[1] .. ':secret'
redis.call('SET', k, ARGV[2], 'NX')
return redis.call('GET', k)
"""


# --- Redis Cluster: the single-slot steps of what spans slots (see _redis_cluster) -------

#: A task's own scripts, unchanged but for their key functions (one slot: ``{t:ID}``).
#: UPDATE answers ``{applied, owner, runner}``: owner and runner set when the task
#: became terminal, also when this write had been applied before (its owner's live set
#: and runner's runs set are the next steps, safe to repeat).
C_UPDATE: Final = (
    _CLUSTER_PRELUDE
    + _UPDATE_ONE
    + """
local applied = update(unpack(ARGV, 2, 9))
if applied == 1 and TERMINAL[ARGV[3]] and not FINISHED[1] then
  -- this very write was applied before (its answer was lost): the next steps again
  local cur = redis.call('HMGET', tkey(ARGV[2]), 'owner', 'runner')
  FINISHED[1], FINISHED[2] = cur[1], cur[2]
end
return {applied, FINISHED[1] or false, FINISHED[2] or false}
"""
)

#: KEYS: the instance's runs set, its lease. ARGV: lease_ms, ids... Adds the ids to
#: the runs set and takes the lease if it had lapsed (the caller also puts the instance
#: in the instance set). Returns {1 if the lease was taken anew else 0, {1 if added else
#: 0, per id}}.
C_ENLIST: Final = """
local added = {}
for i = 2, #ARGV do added[#added + 1] = redis.call('SADD', KEYS[1], ARGV[i]) end
local fresh = redis.call('SET', KEYS[2], '1', 'PX', ARGV[1], 'NX')
if fresh then return {1, added} end
return {0, added}
"""

#: KEYS: the task's hash. ARGV: P, seq, then CREATE's arguments after P. Writes the
#: record (before its owner admits it: a task in an owner's sets always has a hash).
#: Returns the seq, or -2 (id taken); the same create retried answers its seq again.
C_CREATE: Final = (
    _CLUSTER_PRELUDE
    + """
local seq, a = ARGV[2], {unpack(ARGV, 3)}
local id, owner, runner, status = a[1], a[2], a[3], a[4]
local key = tkey(id)
local old = redis.call('HMGET', key, 'runner', 'created', 'seq')
if old[1] then
  if old[1] == runner and old[2] == a[5] then return tonumber(old[3]) end
  return -2
end
redis.call('HSET', key, 'seq', seq, 'owner', owner, 'runner', runner, 'status', status,
  'created', a[5], unpack(a, 10))
if a[8] ~= '' then redis.call('PEXPIREAT', key, a[8]) end
return tonumber(seq)
"""
)

#: KEYS: the owner's live set, its index. ARGV: max_live, now_ms, then per task: id,
#: seq, running ('1'/'0'), expire_at_ms|''. Admits each task under the live cap (an
#: id already in the live set is in) and indexes it. Returns per task 1, or -1 when
#: the cap is reached.
C_ADMIT: Final = """
local live, index = KEYS[1], KEYS[2]
local max_live, now = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 4 do
  local id, seq, running, at = ARGV[i], ARGV[i + 1], ARGV[i + 2] == '1', tonumber(ARGV[i + 3])
  if running and redis.call('SISMEMBER', live, id) == 0
      and redis.call('SCARD', live) >= max_live then
    out[#out + 1] = -1
  else
    if running then redis.call('SADD', live, id) end
    local left = redis.call('PTTL', index)
    redis.call('ZADD', index, 'NX', seq, id)
    if at then
      if left == -2 or (left >= 0 and now + left < at) then redis.call('PEXPIREAT', index, at) end
    else
      redis.call('PERSIST', index)
    end
    out[#out + 1] = 1
  end
end
return out
"""

#: KEYS: the task's hash. ARGV: P, id. Deletes the task's keys. Returns {owner, runner}.
C_DELETE: Final = (
    _CLUSTER_PRELUDE
    + """
local id = ARGV[2]
local key = tkey(id)
local cur = redis.call('HMGET', key, 'owner', 'runner')
redis.call('DEL', key, qkey(id), akey(id))
return {cur[1], cur[2]}
"""
)

#: KEYS: the owner's index. ARGV: after_seq, count. Returns {id, seq, ...} after it.
C_PAGE_IDS: Final = """
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf', 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[2]))
"""

#: KEYS: the instance's lease. ARGV: lease_ms. Returns 1 if it was still held, else 0.
C_RENEW: Final = """
local had = redis.call('EXISTS', KEYS[1])
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return had
"""

#: KEYS: the instance's runs set, its lease. Returns the ids it runs, or false while
#: its lease is held (it came back: nothing to sweep).
C_DEAD_RUNS: Final = """
if redis.call('EXISTS', KEYS[2]) == 1 then return false end
return redis.call('SMEMBERS', KEYS[1])
"""

#: KEYS: the task's hash. ARGV: P, id, message, updated, instance. Fails the task if it
#: is still running on ``instance``. Returns its owner if it did, else false.
C_FAIL: Final = (
    _CLUSTER_PRELUDE
    + """
local id = ARGV[2]
local key = tkey(id)
local cur = redis.call('HMGET', key, 'status', 'owner', 'runner')
if cur[1] and not TERMINAL[cur[1]] and cur[3] == ARGV[5] then
  redis.call('HSET', key, 'status', 'failed', 'msg', ARGV[3], 'updated', ARGV[4])
  redis.call('HDEL', key, 'outcome')
  redis.call('PUBLISH', P .. ':hints', 'status|' .. id)
  return cur[2]
end
return false
"""
)

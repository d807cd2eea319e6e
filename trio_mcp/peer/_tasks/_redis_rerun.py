"""The Lua scripts that hand re-runnable tasks between processes in Redis (see ``_rerun``).

Beside :mod:`._redis_scripts` (same prelude, same key layout), with these keys and
hash fields of their own::

    P:t:{task_id}   HASH  ... tool, attempts, backoff (ms), job (the stored request),
                          attempt: present on a re-runnable task; runner absent
                          while it is queued.
    P:queue         ZSET  queued task ids by the epoch ms they are due.
    P:workers       SET   instances that run queued task work.

A task is queued (``runner`` removed, out of every ``runs`` set, into ``P:queue``)
by :data:`RESCUE` when its process's lease lapsed (or the process closed or
drained: :data:`REQUEUE`), and taken by one process with :data:`CLAIM`, atomically:
the status is re-checked (a task cancelled meanwhile stays cancelled) and the
runner set in the same script, so ten processes racing for one task see one win.
``RESCUE`` is the store's sweep: it also fails what cannot run again (the tasks of
tools without ``rerun=``, and those past their last attempt), one script deciding each
dead task's fate.
"""

from __future__ import annotations

from typing import Final

from ._redis_scripts import _CLUSTER_PRELUDE, _PRELUDE

_REQUEUE_ONE: Final = """
-- Puts live task `id` of runner `runner` (nil: any) back in the queue: its attempt counted
-- (`count`: its run was interrupted) or not (a front queued it); a drain's hand-off
-- does not `spend` one of the attempts allowed (it raises the bound). Returns 1 if it was
-- queued, 2 if it failed (no attempt left), 0 if it is not re-runnable or not live.
local function requeue(id, runner, count, spend, message, updated, now)
  local key = tkey(id)
  local cur = redis.call('HMGET', key, 'status', 'owner', 'job', 'attempt', 'attempts',
    'backoff', 'runner')
  if runner then
    if cur[7] ~= runner then return 0 end  -- not (or no longer) this process's
    redis.call('SREM', P .. ':runs:' .. runner, id)
  end
  if (not cur[1]) or TERMINAL[cur[1]] then return 0 end
  if not cur[3] then return 0 end
  local attempt = tonumber(cur[4] or '1')
  local attempts = tonumber(cur[5] or '1')
  local due = now
  if count and not spend then
    attempts = attempts + 1
    redis.call('HSET', key, 'attempts', attempts)
  end
  if count then
    if attempt >= attempts then
      local runs = 'its only attempt'
      if attempts ~= 1 then runs = 'each of its ' .. attempts .. ' attempts' end
      local plural = 's'
      if attempts == 1 then plural = '' end
      redis.call('HSET', key, 'status', 'failed', 'updated', updated, 'msg',
        'The server process running this task stopped on ' .. runs .. ' (' .. attempts ..
        ' attempt' .. plural .. '); its work was lost.')
      redis.call('HDEL', key, 'outcome', 'runner')
      redis.call('SREM', P .. ':live:' .. cur[2], id)
      redis.call('PUBLISH', P .. ':hints', 'status|' .. id)
      return 2
    end
    attempt = attempt + 1
    due = now + math.floor(tonumber(cur[6] or '0') * 2 ^ (attempt - 2))
    message = 're-running after its process stopped, attempt ' .. attempt .. ' of ' .. attempts
  end
  redis.call('HSET', key, 'status', 'working', 'updated', updated, 'msg', message,
    'attempt', attempt)
  redis.call('HDEL', key, 'outcome', 'runner')
  redis.call('DEL', P .. ':in:' .. id, P .. ':ans:' .. id)
  redis.call('ZADD', P .. ':queue', due, id)
  redis.call('PUBLISH', P .. ':hints', 'status|' .. id)
  redis.call('PUBLISH', P .. ':hints', 'queue|' .. id)
  return 1
end
local function live_workers()
  local n = 0
  for _, inst in ipairs(redis.call('SMEMBERS', P .. ':workers')) do
    if redis.call('EXISTS', P .. ':lease:' .. inst) == 1 then
      n = n + 1
    else
      redis.call('SREM', P .. ':workers', inst)
    end
  end
  return n
end
"""

#: ARGV: P, message, updated, instance|'', now_ms. The sweep: the live tasks of every
#: instance whose lease is gone (or of ``instance``, releasing its lease): a
#: re-runnable one is queued again (or failed after its last attempt), any other
#: failed with ``message``. Returns {failed count, {dead instances}, queued count}.
RESCUE: Final = (
    _PRELUDE
    + _REQUEUE_ONE
    + """
local dead = {}
local now = tonumber(ARGV[5])
if ARGV[4] ~= '' then
  redis.call('DEL', P .. ':lease:' .. ARGV[4])
  dead[1] = ARGV[4]
else
  for _, inst in ipairs(redis.call('SMEMBERS', P .. ':instances')) do
    if redis.call('EXISTS', P .. ':lease:' .. inst) == 0 then dead[#dead + 1] = inst end
  end
end
local failed, queued = 0, 0
for _, inst in ipairs(dead) do
  local runs = P .. ':runs:' .. inst
  for _, id in ipairs(redis.call('SMEMBERS', runs)) do
    local done = requeue(id, nil, true, true, '', ARGV[3], now)
    if done == 1 then
      queued = queued + 1
    elseif done == 2 then
      failed = failed + 1
    else
      local key = tkey(id)
      local cur = redis.call('HMGET', key, 'status', 'owner')
      if cur[1] and not TERMINAL[cur[1]] then
        redis.call('HSET', key, 'status', 'failed', 'msg', ARGV[2], 'updated', ARGV[3])
        redis.call('HDEL', key, 'outcome')
        redis.call('SREM', P .. ':live:' .. cur[2], id)
        redis.call('PUBLISH', P .. ':hints', 'status|' .. id)
        failed = failed + 1
      end
    end
  end
  redis.call('DEL', runs)
  redis.call('SREM', P .. ':instances', inst)
  redis.call('SREM', P .. ':workers', inst)
end
return {failed, dead, queued}
"""
)

#: ARGV: P, instance, count ('1'/'0'), spend ('1'/'0'), message|'', updated, now_ms, ids...
#: Queues these
#: live re-runnable tasks of ``instance`` again (see ``requeue``); without ``count`` and
#: a message: "queued" or "no worker is alive". Returns how many workers are alive.
REQUEUE: Final = (
    _PRELUDE
    + _REQUEUE_ONE
    + """
local workers = live_workers()
local message = ARGV[5]
if message == '' then
  if workers > 0 then
    message = 'queued: waiting for a worker process to run it'
  else
    message = 'queued: no worker process is alive to run it'
  end
end
for i = 8, #ARGV do
  requeue(ARGV[i], ARGV[2], ARGV[3] == '1', ARGV[4] == '1', message, ARGV[6], tonumber(ARGV[7]))
end
return workers
"""
)

#: ARGV: P, instance, lease_ms, now_ms, limit, tools... Takes up to ``limit`` due queued
#: tasks of these tools for ``instance`` (runner set, into its runs set, its lease
#: re-taken if it had lapsed); drops from the queue what is gone or terminal.
#: Returns {id, hash, id, hash, ...}.
CLAIM: Final = (
    _PRELUDE
    + """
local inst, now, limit = ARGV[2], tonumber(ARGV[4]), tonumber(ARGV[5])
local tools = {}
for i = 6, #ARGV do tools[ARGV[i]] = true end
local queue = P .. ':queue'
local out, n = {}, 0
local rows = redis.call('ZRANGEBYSCORE', queue, '-inf', now, 'LIMIT', 0, limit * 4 + 16)
for _, id in ipairs(rows) do
  if n == limit then break end
  local key = tkey(id)
  local cur = redis.call('HMGET', key, 'status', 'tool', 'runner', 'expires', 'attempt')
  if (not cur[1]) or TERMINAL[cur[1]] or gone(cur[4], now) or cur[3] then
    redis.call('ZREM', queue, id)
  elseif tools[cur[2]] then
    redis.call('ZREM', queue, id)
    redis.call('HSET', key, 'runner', inst)
    if cur[5] == '1' then redis.call('HDEL', key, 'msg') end
    redis.call('SADD', P .. ':runs:' .. inst, id)
    n = n + 1
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGETALL', key)
  end
end
if n > 0 then
  redis.call('SADD', P .. ':instances', inst)
  redis.call('SET', P .. ':lease:' .. inst, '1', 'PX', ARGV[3], 'NX')
end
return out
"""
)

#: ARGV: P, instance, '1' (it runs queued work) or '0'.
SET_WORKER: Final = """
local P = ARGV[1]
if ARGV[3] == '1' then
  redis.call('SADD', P .. ':workers', ARGV[2])
else
  redis.call('SREM', P .. ':workers', ARGV[2])
end
return 1
"""


# --- Redis Cluster: the same hand-offs as single-slot steps (see _redis_cluster) --------
#
# A task's fate is decided in its own slot (``{t:ID}``): C_REQUEUE_ONE and C_CLAIM_ONE
# compare-and-set its runner, so a sweep repeated after a sweeper stopped, or two
# claimers racing, change it once. The queue, the worker set, the owner's live set and
# the runs sets are the next steps (``SlotSteps.rescue``, ``requeue``, ``claim``). The
# due time of a queued task is kept in its hash (``due``), so a repeated step puts it
# in the queue again at the same time.

#: KEYS: the task's hash. ARGV: P, id, runner, count ('1'/'0'), spend ('1'/'0'),
#: message|'', updated, now_ms, fail_message|''. Returns {code, due|false, owner|false}:
#: 1 queued (due), 3 queued already (due: a repeated step), 2 failed after its last
#: attempt, 4 failed with ``fail_message`` (not re-runnable), 0 left alone (gone,
#: terminal, run by another, or not re-runnable without a ``fail_message``).
C_REQUEUE_ONE: Final = (
    _CLUSTER_PRELUDE
    + """
local id, runner, count, spend = ARGV[2], ARGV[3], ARGV[4] == '1', ARGV[5] == '1'
local message, updated, now, fail_message = ARGV[6], ARGV[7], tonumber(ARGV[8]), ARGV[9]
local key = tkey(id)
local cur = redis.call('HMGET', key, 'status', 'owner', 'job', 'attempt', 'attempts', 'backoff',
  'runner', 'due')
if (not cur[1]) or TERMINAL[cur[1]] then return {0, false, false} end
if not cur[7] then
  if cur[3] and cur[8] then return {3, cur[8], cur[2]} end
  return {0, false, false}
end
if cur[7] ~= runner then return {0, false, false} end
if not cur[3] then
  if fail_message == '' then return {0, false, false} end
  redis.call('HSET', key, 'status', 'failed', 'msg', fail_message, 'updated', updated)
  redis.call('HDEL', key, 'outcome')
  redis.call('PUBLISH', P .. ':hints', 'status|' .. id)
  return {4, false, cur[2]}
end
local attempt = tonumber(cur[4] or '1')
local attempts = tonumber(cur[5] or '1')
local due = now
if count and not spend then
  attempts = attempts + 1
  redis.call('HSET', key, 'attempts', attempts)
end
if count then
  if attempt >= attempts then
    local runs = 'its only attempt'
    if attempts ~= 1 then runs = 'each of its ' .. attempts .. ' attempts' end
    local plural = 's'
    if attempts == 1 then plural = '' end
    redis.call('HSET', key, 'status', 'failed', 'updated', updated, 'msg',
      'The server process running this task stopped on ' .. runs .. ' (' .. attempts ..
      ' attempt' .. plural .. '); its work was lost.')
    redis.call('HDEL', key, 'outcome', 'runner')
    redis.call('PUBLISH', P .. ':hints', 'status|' .. id)
    return {2, false, cur[2]}
  end
  attempt = attempt + 1
  due = now + math.floor(tonumber(cur[6] or '0') * 2 ^ (attempt - 2))
  message = 're-running after its process stopped, attempt ' .. attempt .. ' of ' .. attempts
end
redis.call('HSET', key, 'status', 'working', 'updated', updated, 'msg', message,
  'attempt', attempt, 'due', due)
redis.call('HDEL', key, 'outcome', 'runner')
redis.call('DEL', qkey(id), akey(id))
redis.call('PUBLISH', P .. ':hints', 'status|' .. id)
redis.call('PUBLISH', P .. ':hints', 'queue|' .. id)
return {1, tostring(due), cur[2]}
"""
)

#: KEYS: the queue. ARGV: now_ms, count. Returns the ids due, earliest first.
C_QUEUE_DUE: Final = """
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
"""

#: KEYS: the task's hash. ARGV: P, id, instance, now_ms, tools... Takes the queued task
#: for ``instance`` (its runner set) if it is live, of one of ``tools`` and not taken.
#: Returns {2, hash} when taken (or already taken by ``instance``: a claim sent again),
#: {1} when it is another tool's, {0} when it is no longer queued (gone, terminal, or
#: run by another process).
C_CLAIM_ONE: Final = (
    _CLUSTER_PRELUDE
    + """
local id, inst, now = ARGV[2], ARGV[3], tonumber(ARGV[4])
local key = tkey(id)
local cur = redis.call('HMGET', key, 'status', 'tool', 'runner', 'expires', 'attempt')
if cur[1] and not TERMINAL[cur[1]] and cur[3] == inst then
  return {2, redis.call('HGETALL', key)}  -- taken by this very claim, sent again
end
if (not cur[1]) or TERMINAL[cur[1]] or gone(cur[4], now) or cur[3] then return {0} end
for i = 5, #ARGV do
  if ARGV[i] == cur[2] then
    redis.call('HSET', key, 'runner', inst)
    if cur[5] == '1' then redis.call('HDEL', key, 'msg') end
    return {2, redis.call('HGETALL', key)}
  end
end
return {1}
"""
)

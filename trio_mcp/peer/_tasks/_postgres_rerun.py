"""The SQL that hands re-runnable tasks between processes in PostgreSQL (see ``_rerun``).

Schema version 2 of :mod:`._postgres_sql` (a version-1 schema is migrated in place,
in the set-up transaction)::

    reruns  (id PK -> tasks cascade, tool, attempts, backoff (ms), job, attempt,
             due)            a re-runnable task's ticket; due: epoch ms it is queued
                             for, NULL while a process runs it
    workers (instance PK)    processes that run queued task work

A queued task's ``runner`` is ``''``. ``rescue`` replaces version 1's ``sweep`` (which
stays, unused): the live tasks of a dead instance are queued again if re-runnable
(or failed after their last attempt), the others failed; a queued task is nobody's
and never swept. ``claim_tasks`` takes due queued tasks with ``FOR UPDATE SKIP
LOCKED`` and sets the runner only while the task is live and queued (one statement,
one transaction): of ten processes claiming one task, one gets it, and a cancel
stored first wins.
"""

from __future__ import annotations

from typing import Final

#: The version these statements make (with ``_postgres_sql``'s version 1 below them).
VERSION: Final = 2

_MIGRATION: Final = """
CREATE TABLE {S}.reruns (
  id text PRIMARY KEY REFERENCES {S}.tasks (id) ON DELETE CASCADE,
  tool text NOT NULL, attempts int NOT NULL, backoff bigint NOT NULL, job text NOT NULL,
  attempt int NOT NULL DEFAULT 1, due bigint
);
CREATE INDEX reruns_due ON {S}.reruns (due) WHERE due IS NOT NULL;
CREATE TABLE {S}.workers (instance text PRIMARY KEY);

-- Queues live re-runnable task p_id again if its runner is p_runner (NULL: any): its
-- attempt counted (p_count) or not (a front queued it); a drain's hand-off does not
-- spend one of the attempts allowed (p_spend false: the bound goes up). 1: queued, 2: failed (no
-- attempt left), 0: not re-runnable, not live or not p_runner's.
CREATE FUNCTION {S}.requeue_task(p_id text, p_runner text, p_count boolean,
  p_spend boolean, p_msg text, p_updated text, p_now bigint)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  t record;
  r record;
  v_attempt int;
  v_msg text := p_msg;
  v_due bigint := p_now;
BEGIN
  SELECT status, runner INTO t FROM {S}.tasks WHERE id = p_id FOR UPDATE;
  IF NOT FOUND OR t.status NOT IN {LIVE} OR (p_runner IS NOT NULL AND t.runner <> p_runner)
  THEN
    RETURN 0;
  END IF;
  SELECT attempt, attempts, backoff INTO r FROM {S}.reruns WHERE id = p_id FOR UPDATE;
  IF NOT FOUND THEN RETURN 0; END IF;
  v_attempt := r.attempt;
  IF p_count AND NOT p_spend THEN
    UPDATE {S}.reruns SET attempts = attempts + 1 WHERE id = p_id;
    r.attempts := r.attempts + 1;
  END IF;
  IF p_count THEN
    IF r.attempt >= r.attempts THEN
      UPDATE {S}.tasks SET status = 'failed', updated = p_updated, outcome = NULL,
        msg = 'The server process running this task stopped on '
          || CASE WHEN r.attempts = 1 THEN 'its only attempt'
                  ELSE 'each of its ' || r.attempts || ' attempts' END
          || ' (' || r.attempts || ' attempt' || CASE WHEN r.attempts = 1 THEN '' ELSE 's' END
          || '); its work was lost.'
        WHERE id = p_id;
      UPDATE {S}.reruns SET due = NULL WHERE id = p_id;
      PERFORM pg_notify({CH}, 'status|' || p_id);
      RETURN 2;
    END IF;
    v_attempt := r.attempt + 1;
    v_due := p_now + floor(r.backoff * power(2, v_attempt - 2))::bigint;
    v_msg := 're-running after its process stopped, attempt ' || v_attempt || ' of '
      || r.attempts;
  END IF;
  UPDATE {S}.tasks SET status = 'working', updated = p_updated, msg = v_msg, outcome = NULL,
    runner = '' WHERE id = p_id;
  UPDATE {S}.reruns SET attempt = v_attempt, due = v_due WHERE id = p_id;
  DELETE FROM {S}.inputs WHERE task_id = p_id;
  DELETE FROM {S}.answers WHERE task_id = p_id;
  PERFORM pg_notify({CH}, 'status|' || p_id);
  PERFORM pg_notify({CH}, 'queue|' || p_id);
  RETURN 1;
END $$;

-- The sweep (version 2): the live tasks of every instance whose lease lapsed (or of
-- p_instance, whose lease it releases): re-runnable ones queued again (or failed
-- after their last attempt), the others failed with p_msg.
CREATE FUNCTION {S}.rescue(p_msg text, p_updated text, p_instance text, p_now bigint,
  OUT failed int, OUT dead text[], OUT queued int) LANGUAGE plpgsql AS $$
DECLARE
  t record;
  v_done int;
BEGIN
  failed := 0;
  queued := 0;
  IF p_instance <> '' THEN
    DELETE FROM {S}.leases WHERE instance = p_instance;
    DELETE FROM {S}.workers WHERE instance = p_instance;
    dead := ARRAY[p_instance];
  ELSE
    WITH gone AS (DELETE FROM {S}.leases WHERE expires <= now() RETURNING instance)
      SELECT coalesce(array_agg(instance), '{}') INTO dead FROM gone;
    DELETE FROM {S}.workers w
      WHERE NOT EXISTS (SELECT 1 FROM {S}.leases l WHERE l.instance = w.instance);
  END IF;
  FOR t IN SELECT id, runner FROM {S}.tasks tk WHERE status IN {LIVE} AND runner <> ''
      AND (runner = p_instance OR (p_instance = '' AND NOT EXISTS (
        SELECT 1 FROM {S}.leases l WHERE l.instance = tk.runner)))
      ORDER BY id FOR UPDATE SKIP LOCKED LOOP
    v_done := {S}.requeue_task(t.id, t.runner, true, true, NULL, p_updated, p_now);
    IF v_done = 1 THEN
      queued := queued + 1;
    ELSIF v_done = 2 THEN
      failed := failed + 1;
    ELSE
      UPDATE {S}.tasks SET status = 'failed', msg = p_msg, updated = p_updated,
        outcome = NULL WHERE id = t.id;
      PERFORM pg_notify({CH}, 'status|' || t.id);
      failed := failed + 1;
    END IF;
  END LOOP;
END $$;

-- Queues these tasks of p_runner again (see requeue_task); without p_count and
-- p_msg: "queued" or "no worker is alive". Returns how many workers are alive.
CREATE FUNCTION {S}.requeue_tasks(p_runner text, p_count boolean, p_spend boolean,
  p_msg text, p_updated text, p_now bigint, p_ids text[]) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  v_workers int;
  v_msg text := p_msg;
  v_id text;
BEGIN
  SELECT count(*) INTO v_workers FROM {S}.workers w JOIN {S}.leases l
    ON l.instance = w.instance WHERE l.expires > now();
  IF v_msg IS NULL AND NOT p_count THEN
    v_msg := CASE WHEN v_workers > 0 THEN 'queued: waiting for a worker process to run it'
      ELSE 'queued: no worker process is alive to run it' END;
  END IF;
  FOREACH v_id IN ARRAY p_ids LOOP
    PERFORM {S}.requeue_task(v_id, p_runner, p_count, p_spend, v_msg, p_updated, p_now);
  END LOOP;
  RETURN v_workers;
END $$;

-- Takes up to p_limit due queued tasks of p_tools for p_instance (its lease row made
-- if it was swept); drops from the queue what is no longer live.
CREATE FUNCTION {S}.claim_tasks(p_instance text, p_tools text[], p_now bigint,
  p_limit int, p_lease_ms bigint) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  r record;
  n int := 0;
BEGIN
  FOR r IN SELECT id, attempt FROM {S}.reruns WHERE due IS NOT NULL AND due <= p_now
      AND tool = ANY (p_tools) ORDER BY due LIMIT p_limit FOR UPDATE SKIP LOCKED LOOP
    UPDATE {S}.reruns SET due = NULL WHERE id = r.id;
    UPDATE {S}.tasks SET runner = p_instance,
      msg = CASE WHEN r.attempt = 1 THEN NULL ELSE msg END
      WHERE id = r.id AND status IN {LIVE} AND runner = ''
        AND (expires IS NULL OR expires > p_now);
    IF FOUND THEN
      n := n + 1;
      RETURN NEXT r.id;
    END IF;
  END LOOP;
  IF n > 0 THEN
    INSERT INTO {S}.leases VALUES (p_instance, now() + p_lease_ms * interval '1 ms')
      ON CONFLICT (instance) DO NOTHING;
  END IF;
END $$;
"""

_COLUMNS: Final = (
    "t.id, t.owner, t.seq, t.method, t.status, t.created, t.updated, t.ttl, t.poll, t.expires,"
    " t.msg, t.outcome, r.tool, r.attempts, r.backoff, r.job, r.attempt"
)

#: The statements of the re-runs (libpq's ``$n`` placeholders; ``{S}`` the schema).
QUERIES: Final = {
    "bump_version": "UPDATE {S}.meta SET value = %s WHERE key = 'schema_version'",
    # create_many with the tickets of its re-runnable tasks, in one statement (so one
    # transaction: a process that dies in between leaves no task without its ticket);
    # $6: [[position in the batch, id, tool, attempts, backoff ms, job, attempt], ...],
    # stored for the tasks created (seq > 0).
    "create_many_reruns": "WITH c AS MATERIALIZED (SELECT x, n FROM unnest({S}.create_tasks("
    "$1, $2::int, $3::bigint, $4::bigint, $5::jsonb)) WITH ORDINALITY AS t(x, n)),"
    " r AS (INSERT INTO {S}.reruns (id, tool, attempts, backoff, job, attempt)"
    " SELECT e->>1, e->>2, (e->>3)::int, (e->>4)::bigint, e->>5, (e->>6)::int"
    " FROM jsonb_array_elements($6::jsonb) AS e JOIN c ON c.n = (e->>0)::bigint AND c.x > 0"
    " ON CONFLICT (id) DO NOTHING)"
    " SELECT x FROM c ORDER BY n",
    "rescue": "SELECT failed, array_to_json(dead)::text, queued"
    " FROM {S}.rescue($1, $2, $3, $4::bigint)",
    "requeue": "SELECT {S}.requeue_tasks($1, $2::boolean, $3::boolean, $4, $5, $6::bigint,"
    " $7::text[])",
    "claim": f"SELECT {_COLUMNS} FROM {{S}}.claim_tasks($1, $2::text[], $3::bigint, $4::int,"
    " $5::bigint) AS c(id) JOIN {S}.tasks t ON t.id = c.id JOIN {S}.reruns r ON r.id = c.id",
    "worker_on": "INSERT INTO {S}.workers VALUES ($1) ON CONFLICT DO NOTHING",
    "worker_off": "DELETE FROM {S}.workers WHERE instance = $1",
}


def migration() -> str:
    """The statements that take a version-1 schema to version 2 (``{S}`` etc. unfilled)."""
    return _MIGRATION

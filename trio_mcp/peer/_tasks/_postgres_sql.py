"""The SQL of :class:`~._postgres.PostgresTaskStore`: its schema, functions and queries.

Everything lives in one PostgreSQL schema (``trio_mcp`` by default), created on first
use and versioned by the ``schema_version`` row of its ``meta`` table::

    meta     (key PK, value)            schema_version, secret (the cursor key, hex)
    tasks    (id PK, seq, owner, runner, method, status, created, updated, ttl, poll,
              expires, msg, outcome)    expires: wall-clock epoch ms, NULL = never;
                                        outcome: JSON text, written and read by Python
    inputs   (task_id, key) PK, pos, body    queued input requests (FK -> tasks, cascade)
    answers  (task_id, key) PK, body         their answers (FK -> tasks, cascade)
    leases   (instance PK, expires)          a process is alive while expires > now()

Indexes: ``tasks (owner, seq)`` for ``tasks/list``, a partial one on the live tasks'
owner (the cap, the sweep) and one on ``expires`` (the purge).

Every change that must be atomic is one PL/pgSQL function (one round trip, one
transaction): a create holds a per-owner advisory lock while it counts the owner's
live tasks and takes the next ``seq`` (so one owner's tasks commit in ``seq`` order
and ``tasks/list`` cursors never skip one); a status write is a compare-and-set
(``UPDATE ... WHERE status IN ('working', 'input_required')``). Hints are
``pg_notify`` on one channel, sent when the transaction commits.
"""

from __future__ import annotations

import re
from typing import Final

from ._postgres_rerun import QUERIES

#: The schema version this code creates and understands.
SCHEMA_VERSION: Final = 1
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")
_LIVE: Final = "('working', 'input_required')"


def check_schema_name(name: str) -> str:
    """``name`` if it is a plain SQL identifier (letters, digits, ``_``; <= 41 chars)."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a valid PostgreSQL schema name for the task store: {name!r}")
    return name


def channel(schema: str) -> str:
    """The ``LISTEN``/``NOTIFY`` channel of the store in ``schema``."""
    return f"{schema}_hints"


def fill(template: str, schema: str) -> str:
    """``template`` with its schema, channel and live statuses filled in."""
    return _fill(template, schema)


def _fill(template: str, schema: str) -> str:
    return (
        template.replace("{S}", f'"{schema}"')
        .replace("{CH}", f"'{channel(schema)}'")
        .replace("{LIVE}", _LIVE)
    )


_DDL: Final = """
CREATE SCHEMA IF NOT EXISTS {S};
CREATE TABLE {S}.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE SEQUENCE {S}.task_seq;
CREATE SEQUENCE {S}.input_pos;
CREATE TABLE {S}.tasks (
  id text PRIMARY KEY, seq bigint NOT NULL, owner text NOT NULL, runner text NOT NULL,
  method text NOT NULL, status text NOT NULL, created text NOT NULL, updated text NOT NULL,
  ttl bigint, poll integer NOT NULL, expires bigint, msg text, outcome text
);
CREATE INDEX tasks_owner_seq ON {S}.tasks (owner, seq);
CREATE INDEX tasks_live ON {S}.tasks (owner) WHERE status IN {LIVE};
CREATE INDEX tasks_expires ON {S}.tasks (expires) WHERE expires IS NOT NULL;
CREATE TABLE {S}.inputs (
  task_id text NOT NULL REFERENCES {S}.tasks (id) ON DELETE CASCADE,
  key text NOT NULL, pos bigint NOT NULL, body text NOT NULL, PRIMARY KEY (task_id, key)
);
CREATE TABLE {S}.answers (
  task_id text NOT NULL REFERENCES {S}.tasks (id) ON DELETE CASCADE,
  key text NOT NULL, body text NOT NULL, PRIMARY KEY (task_id, key)
);
CREATE TABLE {S}.leases (instance text PRIMARY KEY, expires timestamptz NOT NULL);

-- Creates tasks in order, in one transaction; returns each one's seq, -1 (its owner's
-- live cap is reached) or -2 (the id is taken). The same create retried after a lost
-- reply answers its seq again. The owners' advisory locks are taken first, in one
-- global order (no deadlock between batches), and held to the commit: an owner's
-- tasks commit in seq order (tasks/list cursors never skip one) and the cap holds
-- across processes. The runner's lease row
-- is (re)made if it was swept, so a task never belongs to an instance nobody sweeps.
CREATE FUNCTION {S}.create_tasks(
  p_runner text, p_max_live int, p_now bigint, p_lease_ms bigint, p_batch jsonb
) RETURNS bigint[] LANGUAGE plpgsql AS $$
-- p_batch: [[id, owner, status, created, method, updated, ttl, poll, expires, msg,
-- outcome], ...] (ttl and expires may be null; outcome is the outcome's JSON text)
DECLARE
  out bigint[] := '{}';
  t record;
  old record;
  owner_now text;
  live int;
  v_seq bigint;
  leased boolean := false;
  h int;
BEGIN
  FOR h IN SELECT DISTINCT hashtext(e->>1) FROM jsonb_array_elements(p_batch) AS e
      ORDER BY 1 LOOP
    PERFORM pg_advisory_xact_lock(hashtext({CH}), h);
  END LOOP;
  FOR t IN SELECT e->>0 AS id, e->>1 AS owner, e->>2 AS status, e->>3 AS created,
      e->>4 AS method, e->>5 AS updated, (e->>6)::bigint AS ttl, (e->>7)::int AS poll,
      (e->>8)::bigint AS expires, e->>9 AS msg, e->>10 AS outcome
      FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS a(e, n) ORDER BY n LOOP
    SELECT runner, created, seq INTO old FROM {S}.tasks WHERE id = t.id;
    IF FOUND THEN
      out := out || CASE WHEN old.runner = p_runner AND old.created = t.created
        THEN old.seq ELSE -2 END;
      CONTINUE;
    END IF;
    IF owner_now IS DISTINCT FROM t.owner THEN
      owner_now := t.owner;
      SELECT count(*) INTO live FROM (
        SELECT 1 FROM {S}.tasks WHERE owner = owner_now AND status IN {LIVE}
          AND (expires IS NULL OR expires > p_now) LIMIT p_max_live) AS c;
    END IF;
    IF t.status IN {LIVE} THEN
      IF live >= p_max_live THEN
        out := out || -1::bigint;
        CONTINUE;
      END IF;
      live := live + 1;
      IF NOT leased THEN
        INSERT INTO {S}.leases VALUES (p_runner, now() + p_lease_ms * interval '1 ms')
          ON CONFLICT (instance) DO NOTHING;
        leased := true;
      END IF;
    END IF;
    v_seq := nextval('{S}.task_seq');
    INSERT INTO {S}.tasks VALUES (t.id, v_seq, t.owner, p_runner, t.method, t.status,
      t.created, t.updated, t.ttl, t.poll, t.expires, t.msg, t.outcome);
    out := out || v_seq;
  END LOOP;
  RETURN out;
END $$;

-- The compare-and-set status write: applies while the task is live. True if applied,
-- or if this very write was applied already (a retry after a lost reply).
CREATE FUNCTION {S}.update_task(
  p_id text, p_status text, p_updated text, p_msg text, p_outcome text, p_now bigint
) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE {S}.tasks SET status = p_status, updated = p_updated, msg = p_msg,
    outcome = p_outcome
    WHERE id = p_id AND status IN {LIVE} AND (expires IS NULL OR expires > p_now);
  IF FOUND THEN
    PERFORM pg_notify({CH}, 'status|' || p_id);
    RETURN true;
  END IF;
  RETURN EXISTS (SELECT 1 FROM {S}.tasks
    WHERE id = p_id AND status = p_status AND updated = p_updated);
END $$;

CREATE FUNCTION {S}.update_tasks(p_batch jsonb, p_now bigint)
RETURNS boolean[] LANGUAGE plpgsql AS $$
-- p_batch: [[id, status, updated, msg, outcome], ...]
DECLARE
  out boolean[] := '{}';
  t record;
BEGIN
  FOR t IN SELECT e->>0 AS id, e->>1 AS status, e->>2 AS updated, e->>3 AS msg,
      e->>4 AS outcome
      FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS a(e, n) ORDER BY n LOOP
    out := out || {S}.update_task(t.id, t.status, t.updated, t.msg, t.outcome, p_now);
  END LOOP;
  RETURN out;
END $$;

-- Cancels a live task; returns the row after (unchanged if already terminal).
CREATE FUNCTION {S}.cancel_task(p_id text, p_msg text, p_updated text, p_now bigint)
RETURNS SETOF {S}.tasks LANGUAGE plpgsql AS $$
BEGIN
  UPDATE {S}.tasks SET status = 'cancelled', msg = p_msg, updated = p_updated
    WHERE id = p_id AND status IN {LIVE} AND (expires IS NULL OR expires > p_now);
  IF FOUND THEN PERFORM pg_notify({CH}, 'cancel|' || p_id); END IF;
  RETURN QUERY SELECT * FROM {S}.tasks
    WHERE id = p_id AND (expires IS NULL OR expires > p_now);
END $$;

-- Takes or renews a lease; true if it was still held.
CREATE FUNCTION {S}.renew_lease(p_instance text, p_lease_ms bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  held boolean;
BEGIN
  SELECT expires > now() INTO held FROM {S}.leases WHERE instance = p_instance FOR UPDATE;
  INSERT INTO {S}.leases VALUES (p_instance, now() + p_lease_ms * interval '1 ms')
    ON CONFLICT (instance) DO UPDATE SET expires = EXCLUDED.expires;
  RETURN coalesce(held, false);
END $$;

-- Fails the live tasks of every instance whose lease lapsed (or of p_instance, whose
-- lease it releases). Returns how many failed and the dead instances.
CREATE FUNCTION {S}.sweep(p_msg text, p_updated text, p_instance text,
  OUT failed int, OUT dead text[]) LANGUAGE plpgsql AS $$
DECLARE
  v_id text;
BEGIN
  failed := 0;
  IF p_instance <> '' THEN
    DELETE FROM {S}.leases WHERE instance = p_instance;
    dead := ARRAY[p_instance];
    FOR v_id IN UPDATE {S}.tasks SET status = 'failed', msg = p_msg, updated = p_updated,
        outcome = NULL WHERE status IN {LIVE} AND runner = p_instance RETURNING id LOOP
      PERFORM pg_notify({CH}, 'status|' || v_id);
      failed := failed + 1;
    END LOOP;
    RETURN;
  END IF;
  WITH gone AS (DELETE FROM {S}.leases WHERE expires <= now() RETURNING instance)
    SELECT coalesce(array_agg(instance), '{}') INTO dead FROM gone;
  FOR v_id IN UPDATE {S}.tasks t SET status = 'failed', msg = p_msg, updated = p_updated,
      outcome = NULL WHERE status IN {LIVE}
      AND NOT EXISTS (SELECT 1 FROM {S}.leases l WHERE l.instance = t.runner)
      RETURNING id LOOP
    PERFORM pg_notify({CH}, 'status|' || v_id);
    failed := failed + 1;
  END LOOP;
END $$;

-- Queues an input request (at the head when p_front); false if the task is gone.
CREATE FUNCTION {S}.push_input(p_id text, p_key text, p_body text, p_front boolean)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  v_pos bigint := nextval('{S}.input_pos');
BEGIN
  INSERT INTO {S}.inputs VALUES (p_id, p_key, CASE WHEN p_front THEN -v_pos ELSE v_pos END,
    p_body) ON CONFLICT (task_id, key) DO NOTHING;
  PERFORM pg_notify({CH}, 'input|' || p_id);
  RETURN true;
EXCEPTION WHEN foreign_key_violation THEN
  RETURN false;
END $$;

-- Stores the answer to an input request; false if the task is gone.
CREATE FUNCTION {S}.answer_input(p_id text, p_key text, p_body text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {S}.answers VALUES (p_id, p_key, p_body)
    ON CONFLICT (task_id, key) DO UPDATE SET body = EXCLUDED.body;
  PERFORM pg_notify({CH}, 'answer|' || p_id);
  RETURN true;
EXCEPTION WHEN foreign_key_violation THEN
  RETURN false;
END $$;
"""

_COLUMNS: Final = (
    "id, owner, seq, method, status, created, updated, ttl, poll, expires, msg, outcome"
)


def ddl(schema: str) -> str:
    """The statements that create schema version :data:`SCHEMA_VERSION` in ``schema``."""
    return _fill(_DDL, schema)


def queries(schema: str) -> dict[str, str]:
    """Every statement the store runs, for the tables in ``schema`` (the set-up ones
    with psycopg's ``%s`` placeholders, the others with libpq's ``$n``)."""
    q = {
        "lock": "SELECT pg_advisory_xact_lock(hashtext('trio-mcp schema ' || {CH}))",
        "version": "SELECT value FROM {S}.meta WHERE key = 'schema_version'",
        "set_version": "INSERT INTO {S}.meta VALUES ('schema_version', %s)",
        "secret": "INSERT INTO {S}.meta VALUES ('secret', %s) ON CONFLICT (key) DO NOTHING",
        "get_secret": "SELECT value FROM {S}.meta WHERE key = 'secret'",
        "create_many": "SELECT x FROM unnest({S}.create_tasks($1, $2::int, $3::bigint,"
        " $4::bigint, $5::jsonb)) WITH ORDINALITY AS t(x, n) ORDER BY n",
        "get": f"SELECT {_COLUMNS}, (SELECT attempt FROM {{S}}.reruns r WHERE r.id = $1)"
        " FROM {S}.tasks WHERE id = $1",
        "page": f"SELECT {_COLUMNS} FROM {{S}}.tasks WHERE owner = $1 AND seq > $2::bigint"
        " AND (expires IS NULL OR expires > $3::bigint) ORDER BY seq LIMIT $4::int",
        "update": "SELECT {S}.update_task($1, $2, $3, $4, $5, $6::bigint)",
        "update_many": "SELECT x FROM unnest({S}.update_tasks($1::jsonb, $2::bigint))"
        " WITH ORDINALITY AS t(x, n) ORDER BY n",
        "cancel": f"SELECT {_COLUMNS} FROM {{S}}.cancel_task($1, $2, $3, $4::bigint)",
        "delete": "DELETE FROM {S}.tasks WHERE id = $1",
        "terminal_among": "SELECT i FROM unnest($1::text[]) AS i WHERE NOT EXISTS ("
        "SELECT 1 FROM {S}.tasks t WHERE t.id = i AND t.status IN {LIVE}"
        " AND (t.expires IS NULL OR t.expires > $2::bigint))",
        "purge": "DELETE FROM {S}.tasks WHERE id IN (SELECT id FROM {S}.tasks"
        " WHERE expires <= $1::bigint ORDER BY expires LIMIT $2::int FOR UPDATE SKIP LOCKED)",
        "renew": "SELECT {S}.renew_lease($1, $2::bigint)",
        "sweep": "SELECT failed, array_to_json(dead)::text FROM {S}.sweep($1, $2, $3)",
        "push_input": "SELECT {S}.push_input($1, $2, $3, $4::boolean)",
        "claim_oldest": "DELETE FROM {S}.inputs WHERE (task_id, key) = (SELECT task_id, key"
        " FROM {S}.inputs WHERE task_id = $1 ORDER BY pos LIMIT 1 FOR UPDATE SKIP LOCKED)"
        " RETURNING key, body",
        "claim_key": "DELETE FROM {S}.inputs WHERE task_id = $1 AND key = $2 RETURNING key, body",
        "peek_inputs": "SELECT key, body FROM {S}.inputs WHERE task_id = $1 ORDER BY pos",
        "answer_input": "SELECT {S}.answer_input($1, $2, $3)",
        "take_answer": "DELETE FROM {S}.answers WHERE task_id = $1 AND key = $2 RETURNING body",
    }
    q.update(QUERIES)  # schema version 2: the re-runs
    return {name: _fill(text, schema) for name, text in q.items()}

"""The bounds a task registry enforces: :class:`TaskLimits`, the per-requestor
rate limit, and the signed ``tasks/list`` cursors."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from typing import Final, final

import attrs
import trio

from ..._errors import INVALID_PARAMS, RESOURCE_LIMIT, McpError

audit = logging.getLogger("trio_mcp.audit")


@final
@attrs.frozen
class TaskLimits:
    """Bounds on what the task registry accepts. All durations in milliseconds.

    Attributes:
        default_ttl: TTL of a task whose request did not ask for one
            (``None``: unlimited, if ``max_ttl`` allows it).
        max_ttl: Largest TTL granted; a larger request is lowered to it.
            ``None`` allows unlimited TTLs (not recommended).
        poll_interval: ``pollInterval`` suggested to requestors.
        max_live_per_requestor: Live (non-terminal) tasks one requestor
            context may have at once.
        max_tasks: Records (live or finished) the registry keeps at once.
        page_size: Tasks per ``tasks/list`` page.
        rate_per_second: ``tasks/*`` operations one context may make per
            second, on average (a token bucket); ``None`` disables the limit.
        rate_burst: The bucket's size: how many operations may come at once.
        orphan_after: Opt-in (``None``: off). A task created as the child of
            another peer's task (its request named a parent, as
            ``ctx.children()`` does) is cancelled when its parent's children
            scope stopped following it (no ``tasks/get`` naming the parent) for
            this long: the parent's process died without cancelling it.
    """

    default_ttl: int | None = 300_000
    max_ttl: int | None = 3_600_000
    poll_interval: int = 1_000
    max_live_per_requestor: int = 1_024
    max_tasks: int = 65_536
    page_size: int = 100
    rate_per_second: float | None = None
    rate_burst: int = 200
    orphan_after: int | None = None


#: Rate buckets kept before the first sweep of full (idle) ones.
_BUCKET_SWEEP_MIN: Final = 1_024


@final
@attrs.define(eq=False)
class _Bucket:
    tokens: float
    stamp: float




@final
class RateLimiter:
    """A token bucket per requestor context for ``tasks/*`` operations.

    Args:
        rate: Operations per second on average; ``None`` disables the limit.
        burst: How many operations may come at once.
    """

    def __init__(self, rate: float | None, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._buckets: dict[str, _Bucket] = {}
        self._sweep_at = _BUCKET_SWEEP_MIN

    def check(self, owner: str) -> None:
        """Count one operation of ``owner``.

        Raises:
            McpError: -32000 when the owner is over its rate.
        """
        rate = self.rate
        if rate is None:
            return
        now = trio.current_time()
        bucket = self._buckets.get(owner)
        burst = self.burst
        if bucket is None:
            if len(self._buckets) >= self._sweep_at:
                self._sweep(now, rate, burst)
            bucket = self._buckets[owner] = _Bucket(burst, now)
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.stamp) * rate)
        bucket.stamp = now
        if bucket.tokens < 1:
            audit.warning("rate limited context=%s", owner)
            raise McpError(
                RESOURCE_LIMIT,
                f"Rate limit exceeded: at most {rate:g} task operations per second",
            )
        bucket.tokens -= 1

    def _sweep(self, now: float, rate: float, burst: float) -> None:
        """Forget buckets that have filled up again: the same as having none.

        Without this, every connection that ever made a task operation (each
        is its own context when there is no identity) would keep a bucket
        for the registry's lifetime. Sweeps happen when the table doubles,
        so they cost O(1) per new context.
        """
        self._buckets = {
            owner: bucket
            for owner, bucket in self._buckets.items()
            if bucket.tokens + (now - bucket.stamp) * rate < burst
        }
        self._sweep_at = max(_BUCKET_SWEEP_MIN, 2 * len(self._buckets))

    def __len__(self) -> int:
        return len(self._buckets)


@final
class CursorCodec:
    """Opaque ``tasks/list`` cursors: a sequence number signed for one owner.

    Args:
        secret: The HMAC key; random per registry by default, so cursors do
            not survive a restart unless a durable store supplies its own.
    """

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(16)

    def _sign(self, owner: str, seq: int) -> str:
        mac = hmac.new(self._secret, f"{owner}\x00{seq}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()[:12]).decode()

    def make(self, owner: str, seq: int) -> str:
        """The cursor that continues ``owner``'s listing after ``seq``."""
        return f"{seq}.{self._sign(owner, seq)}"

    def read(self, owner: str, cursor: str) -> int:
        """The sequence number in ``cursor``.

        Raises:
            McpError: -32602 for a cursor not issued to ``owner``.
        """
        seq_text, _, mac = cursor.partition(".")
        if (
            seq_text.isdigit()
            and len(seq_text) < 20
            and hmac.compare_digest(mac, self._sign(owner, int(seq_text)))
        ):
            return int(seq_text)
        raise McpError(INVALID_PARAMS, "Invalid cursor")

"""Sessions of 2026-07-28 POSTs, kept between POSTs of the same identity.

A modern POST is served on its own session and peer (no session id; see
:func:`._http_modern.modern_post`). Starting one (a bus, an event store, a
``Peer`` in the modern dialect, their Trio tasks) and ending it cost more
than the request itself, so a session that answered its POST cleanly is kept
here and serves the next POST of the **same identity** (the tasks of a
modern peer belong to its identity, or to nobody without one; nothing else
in it outlives a request). One POST at a time per session: concurrent POSTs
take different sessions. A POST that did not end cleanly (the client left,
the handler was cancelled, ``subscriptions/listen``) ends its session as
before.

Before a kept session serves again, what its last POST left is dropped (its
answer stream and that stream's events), and its transport facts are the new
request's (``bus.info["remote"]``, and the verified identity with its
scopes: the same owner may come with another token).
"""

from __future__ import annotations

from typing import Final, final

import attrs

from ..auth import Identity
from ..peer import IDENTITY_INFO
from ._http_auth import IDENTITY_KEY
from ._http_policy import Scope
from ._http_session import HttpSession

#: Sessions kept at most (all identities together); the oldest go first.
MAX_KEPT_SESSIONS: Final = 64


@final
@attrs.define(eq=False)
class KeptSessions:
    """Idle sessions of modern POSTs, most recently used last.

    Attributes:
        limit: How many are kept at most.
        idle: The kept sessions, oldest first.
    """

    limit: int = MAX_KEPT_SESSIONS
    idle: list[HttpSession] = attrs.field(factory=list, init=False)

    def take(self, identity: str | None, scope: Scope) -> HttpSession | None:
        """An idle session of ``identity`` to serve the request of ``scope``, or None."""
        idle = self.idle
        for i in range(len(idle) - 1, -1, -1):
            session = idle[i]
            if session.identity == identity:
                del idle[i]
                if session.closed:
                    continue
                info = session.bus.info
                client = scope.get("client")
                info["remote"] = f"{client[0]}:{client[1]}" if client else None
                # The same owner, maybe another token: this request's scopes.
                verified = scope.get(IDENTITY_KEY)
                if isinstance(verified, Identity):
                    info[IDENTITY_INFO] = verified
                else:
                    info.pop(IDENTITY_INFO, None)
                return session
        return None

    def keep(self, session: HttpSession) -> HttpSession | None:
        """Keep ``session`` for a later POST; return the session pushed out, to end.

        Returns ``session`` itself when it cannot be kept (it is closed or
        still has a stream open).
        """
        if session.closed or not session.forget_requests():
            return session
        self.idle.append(session)
        if len(self.idle) > self.limit:
            return self.idle.pop(0)
        return None

    def __len__(self) -> int:
        return len(self.idle)

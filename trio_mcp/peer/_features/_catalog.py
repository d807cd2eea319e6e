"""The features a peer is made of, in the order they install and declare.

Adding an MCP feature: write its module (a :class:`~._base.PeerCore` mixin
with ``install`` and, if it declares any, ``declare_server`` /
``declare_client``), then add its class here and to ``Peer``'s bases. The
session is never edited. Order matters for declarations only: the task
receiver comes after every feature whose requests can run as tasks.
"""

from __future__ import annotations

from typing import Any, Final

from ._base import AppView, PeerCore, merge_capabilities
from ._client import ClientFeatures
from ._lifecycle import Lifecycle
from ._task_receiver import TaskReceiver
from ._task_requestor import TaskRequestor
from ._tools import Tools

FEATURES: Final[tuple[type[PeerCore], ...]] = (
    Lifecycle,
    Tools,
    ClientFeatures,
    TaskReceiver,
    TaskRequestor,
)


def declared_server_capabilities(app: AppView) -> dict[str, Any]:
    """The server capabilities every feature declares for ``app``, merged (wire JSON)."""
    caps: dict[str, Any] = {}
    for feature in FEATURES:
        merge_capabilities(caps, feature.declare_server(app, caps))
    return caps


def declared_client_capabilities(app: AppView) -> dict[str, Any]:
    """The client capabilities every feature declares for ``app``, merged (wire JSON)."""
    caps: dict[str, Any] = {}
    for feature in FEATURES:
        merge_capabilities(caps, feature.declare_client(app, caps))
    return caps


def install_features(peer: PeerCore) -> None:
    """Install every feature's handlers on ``peer``'s session."""
    for feature in FEATURES:
        feature.install(peer)

"""The session layer: the message bus and the JSON-RPC session, knowing no MCP.

Features sit above it and fill its method tables; transports below the peer
give it a :class:`MessageBus`.
"""

from ._bus import WAKE_WRITER as WAKE_WRITER
from ._bus import BusEnds as BusEnds
from ._bus import MessageBus as MessageBus
from ._bus import memory_bus_pair as memory_bus_pair
from ._bus import open_bus as open_bus
from ._bus import run_memory_link as run_memory_link
from ._outbound import NOTIFICATION_QUEUE as NOTIFICATION_QUEUE
from ._outbound import current_request_id as current_request_id
from ._outbound import message_observers as message_observers
from ._pending import ProgressCallback as ProgressCallback
from ._pending import call_progress as call_progress
from ._session import MAX_CONCURRENT_REQUESTS as MAX_CONCURRENT_REQUESTS
from ._session import Admission as Admission
from ._session import Answered as Answered
from ._session import NotificationHandler as NotificationHandler
from ._session import Reply as Reply
from ._session import RequestHandler as RequestHandler
from ._session import Session as Session

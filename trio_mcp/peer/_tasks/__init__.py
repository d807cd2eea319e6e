"""The task runtime: the state table, the registry and its actors, the store, the handle.

It talks to connections only through the protocols in :mod:`._connection`,
so it imports nothing from the session or the MCP features above it.
"""

from ._actor import PUSHED as PUSHED
from ._actor import TaskActor as TaskActor
from ._actor import TaskQuestions as TaskQuestions
from ._actor import Work as Work
from ._connection import RequestorConnection as RequestorConnection
from ._connection import StatusWaiters as StatusWaiters
from ._connection import TaskConnection as TaskConnection
from ._handle import TaskHandle as TaskHandle
from ._limits import TaskLimits as TaskLimits
from ._open import open_task_store as open_task_store
from ._questions import PulledInputs as PulledInputs
from ._registry import TaskRegistry as TaskRegistry
from ._sqlite import SqliteTaskStore as SqliteTaskStore
from ._state import TRANSITIONS as TRANSITIONS
from ._state import IllegalTransition as IllegalTransition
from ._state import TaskEvent as TaskEvent
from ._state import next_status as next_status
from ._store import MemoryTaskStore as MemoryTaskStore
from ._store import TaskOutcome as TaskOutcome
from ._store import TaskRecord as TaskRecord
from ._store import TaskStore as TaskStore
from ._tree import META_CHILDREN as META_CHILDREN
from ._tree import META_PARENT as META_PARENT
from ._tree import META_QUESTION as META_QUESTION
from ._tree import ChildLink as ChildLink
from ._tree import TaskTree as TaskTree
from ._tree import followed as followed
from ._tree import parent_of as parent_of
from ._tree import tree_of as tree_of
from ._tree import watch_orphan as watch_orphan

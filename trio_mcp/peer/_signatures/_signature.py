"""What an App function's signature says: its parameters and its context parameter.

Resources, resource templates, prompts and completers are ``async``
functions whose parameters are named after what the peer sends (template
variables, prompt arguments); a parameter annotated with the context type
receives the request's :class:`~trio_mcp.peer._features.RequestContext` instead.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any, final

import attrs

AsyncFunction = Callable[..., Awaitable[Any]]


@final
@attrs.frozen
class Parameter:
    """One parameter of an App function."""

    name: str
    required: bool


@final
@attrs.frozen
class Signature:
    """The peer-facing parameters of a function and the name of its context one."""

    params: tuple[Parameter, ...]
    context_param: str | None
    var_keyword: bool

    @property
    def names(self) -> frozenset[str]:
        """The names of the peer-facing parameters."""
        return frozenset(p.name for p in self.params)


def read_signature(fn: AsyncFunction, context_type: type[Any], what: str) -> Signature:
    """Read ``fn``'s signature.

    Raises:
        TypeError: ``fn`` is not an ``async`` function.
    """
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"{what} {fn!r} must be an async function")
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: fall back to the raw ones
        hints = dict(getattr(fn, "__annotations__", {}))
    params: list[Parameter] = []
    context_param: str | None = None
    var_keyword = False
    for name, param in inspect.signature(fn).parameters.items():
        hint = hints.get(name)
        if hint is context_type or (
            isinstance(hint, str) and hint.rpartition(".")[2] == context_type.__name__
        ):
            context_param = name
        elif param.kind is param.VAR_KEYWORD:
            var_keyword = True
        elif param.kind is not param.VAR_POSITIONAL:
            params.append(Parameter(name, param.default is inspect.Parameter.empty))
    return Signature(tuple(params), context_param, var_keyword)


async def call_with(
    fn: AsyncFunction, sig: Signature, values: dict[str, Any], ctx: Any
) -> Any:
    """Call ``fn`` with the ``values`` it takes (all of them with ``**kwargs``) and ``ctx``."""
    kwargs = dict(values) if sig.var_keyword else {
        k: v for k, v in values.items() if k in sig.names
    }
    if sig.context_param is not None:
        kwargs[sig.context_param] = ctx
    return await fn(**kwargs)

"""What an App offers as a server beyond tools: resources, prompts, completions.

:class:`ServerOffers` is a mixin of :class:`trio_mcp.App`: its decorators
register resources, resource templates, prompts and completers; registering
or removing one while connections are open tells each of them the list
changed; :meth:`ServerOffers.notify_resource_updated` reaches the
connections subscribed to a URI.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, overload

from .._messages import Annotations, Icon, Resource, ResourceTemplate, ResourceUriParams, to_wire
from .._signatures._signature import AsyncFunction, read_signature
from ._base import ChangeListener, PeerCore, Role
from ._context import RequestContext
from ._list_changes import announce, broadcast, offer_all, ready
from ._logging import McpLogHandler
from ._promptspec import PromptSpec, make_prompt_spec
from ._resources import Resources
from ._resourcespec import ResourceSpec, TemplateSpec, compile_template
from ._scopes import scope_set

F = TypeVar("F", bound=AsyncFunction)
#: ``async def complete(value, context) -> list[str] | Completion``.
Completer = Callable[[str, dict[str, str]], Awaitable[Any]]
C = TypeVar("C", bound=Completer)


def _wire_list(items: Sequence[Icon | Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    return None if items is None else [dict(to_wire(i)) for i in items]


def _wire(value: Annotations | Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(to_wire(value))


class ServerOffers:
    """Resources, templates, prompts and completers of an App (a mixin of ``App``)."""

    resources: dict[str, ResourceSpec]
    resource_templates: dict[str, TemplateSpec]
    prompts: dict[str, PromptSpec]
    completers: dict[tuple[str, str, str], Completer]
    connections: set[PeerCore]
    listeners: set[ChangeListener]
    tools: dict[str, Any]
    scope_rules: dict[tuple[str, str], frozenset[str]]
    require_scopes: Callable[[str, str, Iterable[str] | None], None]  # (App's)

    def _list_changed(self, kind: str) -> None:
        broadcast(self, Role.SERVER, f"notifications/{kind}/list_changed")  # type: ignore[arg-type]

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: Annotations | Mapping[str, Any] | None = None,
        icons: Sequence[Icon | Mapping[str, Any]] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
        """Register an async function as the reader of a fixed resource.

        The function returns ``str`` (text), ``bytes`` (a base64 blob),
        resource contents, or a ``ReadResourceResult``; it may take a
        ``RequestContext`` parameter.

        Args:
            uri: The resource's URI.
            name: Its name; the function's name by default.
            title: Display title.
            description: Description; the function's docstring by default.
            mime_type: MIME type, listed and put on the contents.
            size: Size in bytes, if known.
            annotations: ``Annotations`` (audience, priority, lastModified).
            icons: Icons.
            scopes: OAuth scopes a caller needs to see it listed and read it.

        Raises:
            TypeError: The function is not ``async``.
            ValueError: The URI is taken, or a scope is malformed.
        """
        required = scope_set(scopes)

        def register(fn: F) -> F:
            if uri in self.resources:
                raise ValueError(f"a resource with URI {uri!r} is already registered")
            resource = Resource(
                uri=uri, name=name or fn.__name__, title=title,
                description=description if description is not None else fn.__doc__,
                mime_type=mime_type, size=size, annotations=_wire(annotations),
                icons=_wire_list(icons),
            )
            sig = read_signature(fn, RequestContext, "resource")
            self.resources[uri] = ResourceSpec(resource, fn, sig)
            self.require_scopes("resource", uri, required)
            self._list_changed("resources")
            return fn

        return register

    def resource_template(
        self,
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: Annotations | Mapping[str, Any] | None = None,
        icons: Sequence[Icon | Mapping[str, Any]] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
        """Register an async function reading the resources of a URI template.

        The template uses RFC 6570 level-1 variables (``"notes://{user}/{id}"``);
        a URI read is matched against it and the function gets each variable
        as a keyword argument (percent-decoded).

        Args:
            uri_template: The template.
            name: Its name; the function's name by default.
            title: Display title.
            description: Description; the docstring by default.
            mime_type: MIME type of the contents.
            annotations: ``Annotations``.
            icons: Icons.
            scopes: OAuth scopes a caller needs to see it listed and read
                its resources.

        Raises:
            TypeError: The function is not ``async``.
            ValueError: The template is not level 1, is taken, or names a
                variable the function does not take; a malformed scope.
        """
        pattern, variables = compile_template(uri_template)
        required = scope_set(scopes)

        def register(fn: F) -> F:
            if uri_template in self.resource_templates:
                raise ValueError(f"the template {uri_template!r} is already registered")
            sig = read_signature(fn, RequestContext, "resource template")
            missing = [v for v in variables if v not in sig.names and not sig.var_keyword]
            if missing:
                raise ValueError(f"{fn.__name__!r} takes no parameter for {missing}")
            template = ResourceTemplate(
                uri_template=uri_template, name=name or fn.__name__, title=title,
                description=description if description is not None else fn.__doc__,
                mime_type=mime_type, annotations=_wire(annotations), icons=_wire_list(icons),
            )
            self.resource_templates[uri_template] = TemplateSpec(
                template, fn, sig, pattern, variables
            )
            self.require_scopes("template", uri_template, required)
            self._list_changed("resources")
            return fn

        return register

    @overload
    def prompt(self, name: F, /) -> F: ...

    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        arguments: Mapping[str, str] | None = None,
        icons: Sequence[Icon | Mapping[str, Any]] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        name: str | F | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        arguments: Mapping[str, str] | None = None,
        icons: Sequence[Icon | Mapping[str, Any]] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F] | F:
        """Register an async function as a prompt: ``@app.prompt`` or ``@app.prompt(...)``.

        Its parameters are the prompt's arguments (strings); one without a
        default is required. It returns a ``str`` (one user message), a list
        of messages / content blocks / strings, or a ``GetPromptResult``.

        Args:
            name: The prompt's name; the function's name by default.
            title: Display title.
            description: Description; the docstring by default.
            arguments: Descriptions of the arguments, by name.
            icons: Icons.
            scopes: OAuth scopes a caller needs to see it listed and get it.

        Raises:
            TypeError: The function is not ``async``.
            ValueError: The name is taken, ``arguments`` names no parameter,
                or a scope is malformed.
        """
        if callable(name):
            return self.prompt()(name)
        prompt_name = name
        required = scope_set(scopes)

        def register(fn: F) -> F:
            spec = make_prompt_spec(
                fn, context_type=RequestContext, name=prompt_name, title=title,
                description=description, arguments=arguments, icons=_wire_list(icons),
            )
            if spec.prompt.name in self.prompts:
                raise ValueError(f"a prompt named {spec.prompt.name!r} is already registered")
            self.prompts[spec.prompt.name] = spec
            self.require_scopes("prompt", spec.prompt.name, required)
            self._list_changed("prompts")
            return fn

        return register

    def completion(
        self,
        *,
        argument: str,
        prompt: str | None = None,
        resource_template: str | None = None,
    ) -> Callable[[C], C]:
        """Register ``async def complete(value, context)`` for one argument.

        It gets the partial value and the arguments already resolved (a
        ``dict``), and returns a list of strings or a ``Completion``; the
        answer carries the first 100 with ``total`` and ``hasMore``.

        Args:
            argument: The prompt argument or template variable completed.
            prompt: The prompt's name (exactly one of ``prompt`` /
                ``resource_template``).
            resource_template: The resource template's URI template.

        Raises:
            ValueError: Neither or both of ``prompt`` and ``resource_template``.
        """
        if (prompt is None) == (resource_template is None):
            raise ValueError("give exactly one of prompt= and resource_template=")
        key = (
            ("ref/prompt", prompt, argument) if prompt is not None
            else ("ref/resource", str(resource_template), argument)
        )

        def register(fn: C) -> C:
            read_signature(fn, RequestContext, "completer")
            self.completers[key] = fn
            return fn

        return register

    def remove_tool(self, name: str) -> None:
        """Remove a tool; open connections are told the list changed.

        Raises:
            KeyError: No such tool.
        """
        del self.tools[name]
        self.scope_rules.pop(("tool", name), None)
        self._list_changed("tools")

    def remove_resource(self, uri: str) -> None:
        """Remove a fixed resource; open connections are told the list changed.

        Raises:
            KeyError: No such resource.
        """
        del self.resources[uri]
        self.scope_rules.pop(("resource", uri), None)
        self._list_changed("resources")

    def remove_resource_template(self, uri_template: str) -> None:
        """Remove a resource template (and its completers); connections are told.

        Raises:
            KeyError: No such template.
        """
        del self.resource_templates[uri_template]
        self.scope_rules.pop(("template", uri_template), None)
        for key in [k for k in self.completers if k[:2] == ("ref/resource", uri_template)]:
            del self.completers[key]
        self._list_changed("resources")

    def remove_prompt(self, name: str) -> None:
        """Remove a prompt (and its completers); open connections are told.

        Raises:
            KeyError: No such prompt.
        """
        del self.prompts[name]
        self.scope_rules.pop(("prompt", name), None)
        for key in [k for k in self.completers if k[:2] == ("ref/prompt", name)]:
            del self.completers[key]
        self._list_changed("prompts")

    def notify_resource_updated(self, uri: str) -> int:
        """Send ``notifications/resources/updated`` to the connections subscribed to ``uri``.

        Returns:
            How many connections it was queued for.
        """
        count = offer_all(self.listeners, "notifications/resources/updated", {"uri": uri})
        subscribed = [
            peer for peer in list(self.connections)
            if isinstance(peer, Resources) and peer.role is Role.SERVER and ready(peer)
            and uri in peer.subscriptions
        ]
        return count + announce(
            subscribed, "notifications/resources/updated", ResourceUriParams(uri)
        )

    def log_handler(self, level: int = logging.NOTSET) -> logging.Handler:
        """A stdlib ``logging.Handler`` sending records to every client of this App.

        Each record becomes ``notifications/message`` on each open server
        connection whose ``logging/setLevel`` lets it through (DEBUG→debug,
        INFO→info, WARNING→warning, ERROR→error, CRITICAL→critical), with the
        logger's name. Records emitted in worker threads are handed to the
        Trio thread.
        Add it to a logger: ``logging.getLogger("mine").addHandler(app.log_handler())``.
        """
        return McpLogHandler(self, level)  # type: ignore[arg-type]


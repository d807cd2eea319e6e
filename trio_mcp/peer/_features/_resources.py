"""The resources feature: list, templates, read, subscribe, and their notifications.

As a server it lists and reads the App's resources and templates (a URI
that is no fixed resource is matched against the templates, in order of
registration), and keeps the set of URIs this connection subscribed to, so
that :meth:`trio_mcp.App.notify_resource_updated` reaches subscribers only.
As a client it calls them and hands ``notifications/resources/updated`` to
the App's callback.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from ..._errors import METHOD_NOT_FOUND, RESOURCE_LIMIT, McpError
from .._messages import (
    EmptyResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    Notification,
    PaginatedParams,
    ReadResourceResult,
    Request,
    Resource,
    ResourceTemplate,
    ResourceUriParams,
    from_wire,
)
from .._signatures._signature import call_with
from ._base import AppView, PeerCore, Role
from ._callbacks import run_callback
from ._context import RequestContext
from ._pages import page
from ._resourcespec import ResourceSpec, TemplateSpec, to_read_result
from ._scopes import check_scopes, rule, visible

log = logging.getLogger("trio_mcp.peer")

#: JSON-RPC error code for a URI the server has no resource for.
RESOURCE_NOT_FOUND: Final = -32002
#: The most URIs one connection may subscribe to.
MAX_SUBSCRIPTIONS: Final = 1_000


def find_resource(
    app: AppView, uri: str
) -> tuple[ResourceSpec | TemplateSpec, dict[str, str]] | None:
    """The fixed resource or first matching template for ``uri``, with its variables."""
    spec: ResourceSpec | None = app.resources.get(uri)
    if spec is not None:
        return spec, {}
    template: TemplateSpec
    for template in app.resource_templates.values():
        variables = template.match(uri)
        if variables is not None:
            return template, variables
    return None


def _resource_uri(spec: ResourceSpec) -> str:
    return spec.resource.uri


def _template_uri(spec: TemplateSpec) -> str:
    return spec.template.uri_template


class Resources(PeerCore):
    """Serve the App's resources and read the other side's.

    Attributes:
        subscriptions: The URIs this connection's client subscribed to (server role).
    """

    subscriptions: set[str]

    def install(self) -> None:
        self.subscriptions = set()
        handlers = self.session.request_handlers
        handlers["resources/list"] = self._on_resources_list
        handlers["resources/templates/list"] = self._on_templates_list
        handlers["resources/read"] = self._on_resources_read
        handlers["resources/subscribe"] = self._on_subscribe
        handlers["resources/unsubscribe"] = self._on_unsubscribe
        notes = self.session.notification_handlers
        notes["notifications/resources/updated"] = self._on_resource_updated

    @classmethod
    def declare_server(cls, app: AppView, declared: Mapping[str, Any]) -> Mapping[str, Any]:
        if not app.resources and not app.resource_templates:
            return {}
        return {"resources": {"subscribe": True, "listChanged": True}}

    # --- server side -------------------------------------------------------------------

    def _serving_resources(self, req: Request) -> None:
        if self.role is not Role.SERVER or not (self.app.resources or self.app.resource_templates):
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {req.method}")

    async def _on_resources_list(self, req: Request) -> ListResourcesResult:
        self._serving_resources(req)
        specs: list[ResourceSpec] = visible(
            self, req, "resource", self.app.resources.values(), _resource_uri
        )
        items, cursor = page(req, specs)
        return ListResourcesResult(resources=[s.resource for s in items], next_cursor=cursor)

    async def _on_templates_list(self, req: Request) -> ListResourceTemplatesResult:
        self._serving_resources(req)
        specs: list[TemplateSpec] = visible(
            self, req, "template", self.app.resource_templates.values(), _template_uri
        )
        items, cursor = page(req, specs)
        return ListResourceTemplatesResult(
            resource_templates=[s.template for s in items], next_cursor=cursor
        )

    def _find_resource(
        self, req: Request
    ) -> tuple[str, ResourceSpec | TemplateSpec, dict[str, str]]:
        self._serving_resources(req)
        uri = from_wire(req.params or {}, ResourceUriParams).uri
        found = find_resource(self.app, uri)
        if found is None:
            raise McpError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
        if self.app.scope_rules:
            spec = found[0]
            required = rule(self.app, "resource", uri) if isinstance(spec, ResourceSpec) else (
                rule(self.app, "template", spec.template.uri_template))
            check_scopes(self, req, required, f"resource {uri[:100]!r}")
        return uri, *found

    async def _on_resources_read(self, req: Request) -> ReadResourceResult:
        uri, spec, variables = self._find_resource(req)
        ctx = RequestContext(
            self, req.id, (req.params or {}).get("_meta"), dialect=self.dialect_of(req),
            caller=req.caller,
        )
        value = await call_with(spec.fn, spec.sig, variables, ctx)
        listing = spec.resource if isinstance(spec, ResourceSpec) else spec.template
        mime = listing.mime_type
        return to_read_result(value, uri, mime)

    async def _on_subscribe(self, req: Request) -> EmptyResult:
        uri, _, _ = self._find_resource(req)
        if uri not in self.subscriptions and len(self.subscriptions) >= MAX_SUBSCRIPTIONS:
            raise McpError(RESOURCE_LIMIT, f"Too many subscriptions (at most {MAX_SUBSCRIPTIONS})")
        self.subscriptions.add(uri)
        return EmptyResult()

    async def _on_unsubscribe(self, req: Request) -> EmptyResult:
        self._serving_resources(req)
        self.subscriptions.discard(from_wire(req.params or {}, ResourceUriParams).uri)
        return EmptyResult()

    # --- client side -------------------------------------------------------------------

    def _on_resource_updated(self, note: Notification) -> None:
        if self.role is not Role.CLIENT:
            return
        try:
            uri = from_wire(note.params or {}, ResourceUriParams).uri
        except McpError:
            log.info("malformed notifications/resources/updated ignored")
            return
        run_callback(self, self.app.callbacks.resource_updated, uri)

    async def list_resources(self, cursor: str | None = None) -> ListResourcesResult:
        """One page of the server's resources (``resources/list``).

        Raises:
            RemoteError: The server refused (-32601 without resources, -32602
                for a bad cursor).
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled``; nothing else changes.
        """
        params = PaginatedParams(cursor) if cursor else None
        return await self.request("resources/list", params, ListResourcesResult)

    async def list_all_resources(self) -> list[Resource]:
        """Every resource of the server, following ``nextCursor`` to the end.

        Cancellation: as for :meth:`list_resources`.
        """
        out: list[Resource] = []
        cursor: str | None = None
        while True:
            result = await self.list_resources(cursor)
            out.extend(result.resources)
            if not result.next_cursor:
                return out
            cursor = result.next_cursor

    async def list_resource_templates(
        self, cursor: str | None = None
    ) -> ListResourceTemplatesResult:
        """One page of the server's resource templates (``resources/templates/list``).

        Raises:
            RemoteError, ConnectionClosed: As for :meth:`list_resources`.

        Cancellation: sends ``notifications/cancelled``; nothing else changes.
        """
        params = PaginatedParams(cursor) if cursor else None
        return await self.request("resources/templates/list", params, ListResourceTemplatesResult)

    async def list_all_resource_templates(self) -> list[ResourceTemplate]:
        """Every resource template of the server, following ``nextCursor``.

        Cancellation: as for :meth:`list_resource_templates`.
        """
        out: list[ResourceTemplate] = []
        cursor: str | None = None
        while True:
            result = await self.list_resource_templates(cursor)
            out.extend(result.resource_templates)
            if not result.next_cursor:
                return out
            cursor = result.next_cursor

    async def read_resource(self, uri: str) -> ReadResourceResult:
        """Read a resource (``resources/read``).

        Raises:
            RemoteError: -32002 (with the URI in ``data``) for an unknown URI.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled``; nothing else changes.
        """
        return await self.request("resources/read", ResourceUriParams(uri), ReadResourceResult)

    async def subscribe_resource(self, uri: str) -> None:
        """Ask for ``notifications/resources/updated`` about ``uri``.

        The App's :meth:`~trio_mcp.App.on_resource_updated` callback receives them.

        Raises:
            RemoteError: -32002 for an unknown URI; -32601 if the server has
                no resources.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled``; the server may or
            may not have subscribed.
        """
        await self.client_era.subscribe(uri)  # (2026-07-28: a subscriptions/listen filter)

    async def unsubscribe_resource(self, uri: str) -> None:
        """Stop the updates about ``uri`` (``resources/unsubscribe``).

        Raises:
            RemoteError, ConnectionClosed: As for :meth:`subscribe_resource`.

        Cancellation: sends ``notifications/cancelled``; the server may or
            may not have unsubscribed.
        """
        await self.client_era.unsubscribe(uri)

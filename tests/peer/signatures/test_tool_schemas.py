"""End to end: tool schemas from type hints, structured arguments and results, sync tools.

A real server ``App`` and client joined in memory (``open_memory_pair``), so
every schema and result crosses as JSON, as on any transport.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import json
import threading
from collections.abc import Iterator
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import attrs
import jsonschema
import pytest
import trio

import trio_mcp
from trio_mcp.peer._messages import CallToolResult, TextContent, Tool, to_wire

from tests.helpers import SCHEMA_PATH


class Unit(enum.Enum):
    METRIC = "metric"
    IMPERIAL = "imperial"


@attrs.define
class Location:
    """Where.

    Attributes:
        city: City name.
        country: ISO country code.
    """

    city: str
    country: str = "NL"


@dataclasses.dataclass
class Trip:
    stops: list[Location]
    unit: Unit = Unit.METRIC


class Prefs(TypedDict):
    language: str
    days: NotRequired[int]


@attrs.define
class Forecast:
    city: str
    temperatures: list[float]
    unit: Unit


@attrs.define
class Category:
    name: str
    sub: list[Category] = attrs.Factory(list)


SEEN: list[Any] = []


def weather_app() -> trio_mcp.App:
    app = trio_mcp.App("weather")

    @app.tool()
    async def plan(trip: Trip, prefs: Prefs, mode: Literal["fast", "scenic"] = "fast") -> str:
        """Plan a trip.

        Args:
            trip: The stops, in order.
            prefs: What the traveller likes.
            mode: How to travel.
        """
        SEEN.append((trip, prefs, mode))
        return " -> ".join(stop.city for stop in trip.stops)

    @app.tool()
    async def forecast(where: Location, days: Annotated[int, "How many days"] = 3) -> Forecast:
        """The forecast for a place."""
        return Forecast(where.city, [20.5] * days, Unit.METRIC)

    @app.tool()
    async def count(words: list[str]) -> int:
        return len(words)

    @app.tool()
    async def tree(root: Category) -> Category:
        return root

    @app.tool()
    async def echo(text: str) -> str:
        return text

    @app.tool()
    async def maybe(text: str) -> str | None:
        return text or None

    @app.tool()
    async def raw(text: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(text)])

    @app.tool()
    async def blocks(text: str) -> list[TextContent]:
        return [TextContent(text), TextContent(text)]

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add in a worker thread."""
        SEEN.append(threading.current_thread() is threading.main_thread())
        return a + b

    return app


@pytest.fixture(autouse=True)
def clear_seen() -> Iterator[None]:
    SEEN.clear()
    yield
    SEEN.clear()


def tool_validator() -> jsonschema.protocols.Validator:
    spec = json.loads(SCHEMA_PATH.read_text())
    schema = {"$schema": spec["$schema"], "$defs": spec["$defs"], "$ref": "#/$defs/Tool"}
    validator_cls = jsonschema.validators.validator_for(schema)
    return validator_cls(schema)  # type: ignore[no-any-return]


async def listed(app: trio_mcp.App) -> dict[str, Tool]:
    async with trio_mcp.open_memory_pair(app) as (client, _):
        return {t.name: t for t in await client.list_all_tools()}


async def test_tool_schemas_listed_are_full_and_valid() -> None:
    tools = await listed(weather_app())
    validator = tool_validator()
    for tool in tools.values():
        validator.validate(to_wire(tool))
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        if tool.output_schema is not None:
            jsonschema.Draft202012Validator.check_schema(tool.output_schema)
    plan = tools["plan"].input_schema
    assert plan["required"] == ["trip", "prefs"]
    trip = plan["properties"]["trip"]
    assert trip["description"] == "The stops, in order."
    assert trip["properties"]["stops"]["items"]["properties"]["city"] == {
        "type": "string", "description": "City name."
    }
    assert trip["properties"]["unit"] == {
        "enum": ["metric", "imperial"], "type": "string", "default": "metric"
    }
    assert plan["properties"]["prefs"]["required"] == ["language"]
    assert plan["properties"]["mode"] == {
        "enum": ["fast", "scenic"], "type": "string", "description": "How to travel.",
        "default": "fast",
    }
    assert tools["forecast"].input_schema["properties"]["days"] == {
        "type": "integer", "description": "How many days", "default": 3
    }
    assert tools["count"].input_schema["properties"]["words"] == {
        "type": "array", "items": {"type": "string"}
    }
    assert tools["tree"].input_schema["$defs"]["Category"]["properties"]["sub"]["items"] == {
        "$ref": "#/$defs/Category"
    }


async def test_tool_schemas_output_schema_only_for_structured_returns() -> None:
    tools = await listed(weather_app())
    assert tools["forecast"].output_schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "temperatures": {"type": "array", "items": {"type": "number"}},
            "unit": {"enum": ["metric", "imperial"], "type": "string"},
        },
        "required": ["city", "temperatures", "unit"],
    }
    assert tools["count"].output_schema == {
        "type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]
    }
    assert tools["tree"].output_schema is not None
    assert tools["tree"].output_schema["type"] == "object"
    for name in ("plan", "echo", "maybe", "raw", "blocks"):
        assert tools[name].output_schema is None, name


async def test_tool_schemas_nested_arguments_arrive_structured() -> None:
    async with trio_mcp.open_memory_pair(weather_app()) as (client, _):
        result = await client.call_tool("plan", {
            "trip": {"stops": [{"city": "Delft"}, {"city": "Gent", "country": "BE"}],
                     "unit": "imperial"},
            "prefs": {"language": "nl"},
        })
    assert not result.is_error and result.text == "Delft -> Gent"
    trip, prefs, mode = SEEN[0]
    assert trip == Trip([Location("Delft"), Location("Gent", "BE")], Unit.IMPERIAL)
    assert prefs == {"language": "nl"} and mode == "fast"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"trip": {"stops": [{"city": "Delft"}, {"city": 7}]}, "prefs": {"language": "nl"}},
         "argument 'trip.stops[1].city': expected a string, got integer"),
        ({"trip": {"stops": []}, "prefs": {"days": 2}}, "argument 'prefs.language' is required"),
        ({"trip": {"stops": [], "unit": "kelvin"}, "prefs": {"language": "nl"}},
         "argument 'trip.unit': expected one of [\"metric\", \"imperial\"], got \"kelvin\""),
        ({"trip": {"stops": []}, "prefs": {"language": "nl"}, "mode": "slow"},
         "argument 'mode' must be one of ['fast', 'scenic']"),
        ({"trip": [], "prefs": {"language": "nl"}},
         "argument 'trip' must be of type object"),
    ],
)
async def test_tool_schemas_bad_nested_value_is_an_error_result_naming_the_path(
    arguments: dict[str, Any], problem: str
) -> None:
    async with trio_mcp.open_memory_pair(weather_app()) as (client, _):
        result = await client.call_tool("plan", arguments)
    assert result.is_error
    assert result.text == f"Invalid arguments for tool plan: {problem}"
    assert not SEEN  # the tool never ran


async def test_tool_schemas_structured_result_matches_the_output_schema() -> None:
    async with trio_mcp.open_memory_pair(weather_app()) as (client, _):
        tools = {t.name: t for t in await client.list_all_tools()}
        forecast = await client.call_tool("forecast", {"where": {"city": "Delft"}, "days": 2})
        count = await client.call_tool("count", {"words": ["a", "b", "c"]})
        tree = await client.call_tool("tree", {"root": {"name": "a", "sub": [{"name": "b"}]}})
        echo = await client.call_tool("echo", {"text": "hi"})
        maybe = await client.call_tool("maybe", {"text": "hi"})
        nothing = await client.call_tool("maybe", {"text": ""})
        raw = await client.call_tool("raw", {"text": "as is"})
        blocks = await client.call_tool("blocks", {"text": "x"})
    expected = {"city": "Delft", "temperatures": [20.5, 20.5], "unit": "metric"}
    assert forecast.structured_content == expected
    assert json.loads(forecast.text) == expected
    assert count.structured_content == {"result": 3} and count.text == "3"
    assert tree.structured_content == {"name": "a", "sub": [{"name": "b", "sub": []}]}
    for name, result in (("forecast", forecast), ("count", count), ("tree", tree)):
        schema = tools[name].output_schema
        assert schema is not None
        jsonschema.Draft202012Validator(schema).validate(result.structured_content)
    assert echo.structured_content is None and echo.text == "hi"
    assert maybe.structured_content is None and maybe.text == "hi"
    assert nothing.content == [] and not nothing.is_error
    assert raw.structured_content is None and raw.text == "as is"
    assert blocks.structured_content is None and len(blocks.content) == 2


async def test_tool_schemas_sync_tool_runs_in_a_worker_thread() -> None:
    async with trio_mcp.open_memory_pair(weather_app()) as (client, _):
        result = await client.call_tool("add", {"a": 2, "b": 3})
        bad = await client.call_tool("add", {"a": 2, "b": "3"})
    assert result.structured_content == {"result": 5} and not result.is_error
    assert SEEN == [False]  # not the main (Trio) thread
    assert bad.is_error and "argument 'b' must be of type integer" in bad.text


async def test_tool_schemas_sync_tool_errors_become_error_results() -> None:
    app = trio_mcp.App("s")

    @app.tool()
    def explode() -> str:
        raise ValueError("no thanks")

    async with trio_mcp.open_memory_pair(app) as (client, _):
        result = await client.call_tool("explode")
    assert result.is_error and result.text == "Tool explode failed: ValueError: no thanks"


async def test_tool_schemas_cancelled_sync_tool_call_ends_at_once() -> None:
    app = trio_mcp.App("s")
    entered = trio.Event()
    release = threading.Event()
    finished = threading.Event()

    @app.tool()
    def block() -> str:
        trio.from_thread.run_sync(entered.set)
        release.wait(30)
        finished.set()
        return "late"

    @app.tool()
    def ping() -> str:
        return "pong"

    try:
        async with trio_mcp.open_memory_pair(app) as (client, _):
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()

                async def call() -> None:
                    with scope:
                        await client.call_tool("block")

                nursery.start_soon(call)
                await entered.wait()
                scope.cancel()
            assert (await client.call_tool("ping")).text == "pong"
        # The server closed (cancelling its handlers) without waiting for the
        # thread: it was abandoned, and still runs.
        assert not finished.is_set()
    finally:
        release.set()
    assert finished.wait(5)  # ... on to its end, its result dropped


async def test_tool_schemas_sync_tool_can_stop_early_with_check_cancelled() -> None:
    app = trio_mcp.App("s")
    entered = trio.Event()
    stopped = threading.Event()

    @app.tool()
    def poll() -> str:
        trio.from_thread.run_sync(entered.set)
        try:
            for _ in range(3000):
                trio.from_thread.check_cancelled()
                threading.Event().wait(0.01)
        except trio.Cancelled:
            stopped.set()
            raise
        return "never"

    async with trio_mcp.open_memory_pair(app) as (client, _):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "poll")
                await entered.wait()
                scope.cancel()
    assert stopped.wait(10)  # the thread saw the cancellation and ended


async def test_tool_schemas_sync_tool_as_task_can_be_cancelled() -> None:
    app = trio_mcp.App("s")
    entered = trio.Event()
    release = threading.Event()

    finished = threading.Event()

    @app.tool(task_support="optional")
    def slow() -> str:
        trio.from_thread.run_sync(entered.set)
        release.wait(30)
        finished.set()
        return "late"

    try:
        async with trio_mcp.open_memory_pair(app) as (client, _):
            handle = await client.call_tool_task("slow")
            await entered.wait()
            task = await client.cancel_task(handle.task_id)
            assert task.status.value == "cancelled"
            assert (await client.get_task(handle.task_id)).status.value == "cancelled"
        assert not finished.is_set()  # closing did not wait for the thread
    finally:
        release.set()
    assert finished.wait(5)


async def test_tool_schemas_explicit_schemas_still_win() -> None:
    app = trio_mcp.App("s")
    given = {"type": "object", "properties": {"n": {"type": "integer"}}}

    @app.tool(input_schema={"type": "object"}, output_schema=given)
    async def answer(n: int) -> dict[str, int]:
        return {"n": n}

    async with trio_mcp.open_memory_pair(app) as (client, _):
        tool = (await client.list_all_tools())[0]
        result = await client.call_tool("answer", {"n": 4})
    assert tool.input_schema == {"type": "object"} and tool.output_schema == given
    assert result.structured_content == {"n": 4}


@pytest.mark.skipif(
    importlib.util.find_spec("pydantic") is None,
    reason="pydantic is not installed (optional: only a pydantic model parameter needs it)",
)
async def test_tool_schemas_pydantic_model_argument_and_result() -> None:
    import pydantic

    class Order(pydantic.BaseModel):
        item: str
        qty: int = pydantic.Field(ge=1)

    app = trio_mcp.App("shop")

    async def place(order: Order) -> Order:
        assert isinstance(order, Order)
        return order.model_copy(update={"qty": order.qty * 2})

    place.__annotations__ = {"order": Order, "return": Order}  # a local class: no strings
    app.tool()(place)
    async with trio_mcp.open_memory_pair(app) as (client, _):
        tool = (await client.list_all_tools())[0]
        ok = await client.call_tool("place", {"order": {"item": "tea", "qty": 2}})
        bad = await client.call_tool("place", {"order": {"item": "tea", "qty": 0}})
    tool_validator().validate(to_wire(tool))
    assert tool.input_schema["properties"]["order"]["properties"]["qty"]["minimum"] == 1
    assert tool.output_schema is not None and tool.output_schema["type"] == "object"
    assert ok.structured_content == {"item": "tea", "qty": 4}
    assert bad.is_error and "argument 'order.qty'" in bad.text


def test_tool_schemas_registration_rejects_what_is_not_a_tool_function() -> None:
    app = trio_mcp.App("s")

    async def stream() -> Any:  # an async generator is not a tool
        yield 1

    with pytest.raises(TypeError, match="must be a function"):
        app.tool()(stream)
    with pytest.raises(TypeError, match="must be a function"):
        app.tool(name="x")(42)  # type: ignore[type-var]


async def test_tool_schemas_object_with_async_call_is_awaited() -> None:
    class Greeter:
        __name__ = "greet"

        async def __call__(self, name: str) -> str:
            return f"hi {name}"

    app = trio_mcp.App("s")
    app.tool()(Greeter())
    async with trio_mcp.open_memory_pair(app) as (client, _):
        result = await client.call_tool("greet", {"name": "ann"})
    assert result.text == "hi ann"


async def test_tool_schemas_list_any_of_content_blocks_is_sent_as_content() -> None:
    # The conformance suite's image/audio/mixed-content tools return content blocks
    # from a function annotated ``-> list[Any]``: no outputSchema, content as given.
    from trio_mcp.peer._messages import ImageContent

    app = trio_mcp.App("content")

    @app.tool
    async def picture() -> list[Any]:
        return [TextContent("look:"), ImageContent(data="iVBORw0KGgo=", mime_type="image/png")]

    async with trio_mcp.open_memory_pair(app) as (client, _):
        (tool,) = await client.list_all_tools()
        assert tool.output_schema is None
        result = await client.call_tool("picture")
        assert not result.is_error and result.structured_content is None
        assert [type(block).__name__ for block in result.content] == ["TextContent", "ImageContent"]


# --- inline tools: a plain def run on the event loop -------------------------------------


async def test_tool_schemas_inline_tool_runs_on_the_event_loop_without_a_task() -> None:
    """inline=True: the function runs in the Trio thread, in the task that read the
    request (no worker thread, no task of its own); as a task it runs in the actor."""
    app = trio_mcp.App("inline")
    where: list[tuple[bool, str]] = []

    @app.tool(inline=True, task_support="optional")
    def add(a: int, b: int) -> int:
        """Add, right here."""
        task = trio.lowlevel.current_task().name
        where.append((threading.current_thread() is threading.main_thread(), task))
        return a + b

    @app.tool(inline=True)
    def broken() -> str:
        """Fail."""
        raise ValueError("no luck")

    async with trio_mcp.open_memory_pair(app) as (client, _):
        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"result": 5} and not result.is_error
        bad = await client.call_tool("add", {"a": "x", "b": 3})
        assert bad.is_error and "argument 'a'" in bad.content[0].text  # type: ignore[union-attr]
        failed = await client.call_tool("broken")
        assert failed.is_error and "ValueError: no luck" in failed.content[0].text  # type: ignore[union-attr]
        handle = await client.call_tool_task("add", {"a": 1, "b": 1})
        assert (await handle.result()).structured_content == {"result": 2}
    (on_loop, plain_task), (in_actor, actor_task) = where
    assert on_loop and in_actor
    assert "tools/call" not in plain_task  # not a request task (those are named by method)
    assert actor_task == "trio_mcp.TaskActor.run"


def test_tool_schemas_inline_is_for_plain_functions_only() -> None:
    app = trio_mcp.App("inline")

    async def coro() -> str:
        return ""

    with pytest.raises(ValueError, match="inline=True is for plain def tools"):
        app.tool(inline=True)(coro)

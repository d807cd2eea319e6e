"""Units of the tool schema modules (``_hints``, ``_schema``, ``_arguments``, ``_toolsig``): JSON Schemas from type hints, argument structuring."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    NewType,
    NotRequired,
    Optional,
    TypedDict,
    TypeVar,
)

import attrs
import jsonschema
import pytest

from trio_mcp.peer._signatures._arguments import ArgumentError, converter
from trio_mcp.peer._signatures._hints import docstring_args, docstring_sections
from trio_mcp.peer._signatures._schema import SchemaBuilder, type_schema
from trio_mcp.peer._signatures._toolsig import analyze_signature, needs_structuring, output_shape
from trio_mcp.peer._signatures._toolspec import check_arguments, compile_check

T = TypeVar("T")
UserId = NewType("UserId", int)


class Color(enum.Enum):
    """A primary colour."""

    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.define
class Point:
    """A point on the plane.

    Attributes:
        x: Distance across.
        y: Distance down,
            from the top.
    """

    x: int
    y: int = 0


@dataclasses.dataclass
class Shape:
    name: str
    points: list[Point]
    color: Color = Color.RED
    tags: list[str] = dataclasses.field(default_factory=list)


class Options(TypedDict):
    """Display options."""

    verbose: bool
    depth: NotRequired[int]


class Loose(TypedDict, total=False):
    a: int
    b: str


@attrs.define
class Node:
    value: int
    children: list[Node] = attrs.Factory(list)


@dataclasses.dataclass
class Even:
    odd: Odd | None = None


@dataclasses.dataclass
class Odd:
    even: Even | None = None


@attrs.define
class Box(Generic[T]):
    item: T


class Described:
    """Stands for pydantic's ``Field``: any object with a ``description``."""

    description = "from a field"
    title = "Field title"


def check(schema: dict[str, Any]) -> dict[str, Any]:
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def valid(schema: dict[str, Any], instance: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(instance)


# --- schemas ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (UserId, {"type": "integer"}),
        (list, {"type": "array"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (Sequence[int], {"type": "array", "items": {"type": "integer"}}),
        (set[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (dict, {"type": "object"}),
        (dict[str, Any], {"type": "object"}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Mapping[str, list[int]], {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "integer"}},
        }),
        (Literal["a"], {"const": "a", "type": "string"}),
        (Literal["a", "b"], {"enum": ["a", "b"], "type": "string"}),
        (Literal[1, "a", None], {"enum": [1, "a", None], "type": ["integer", "string", "null"]}),
        (Level, {"enum": [1, 2], "type": "integer"}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - that spelling too
        (int | str, {"type": ["integer", "string"]}),
        (
            list[int] | None,
            {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]},
        ),
        (int | Any, {}),
        (Annotated[int, "How many"], {"type": "integer", "description": "How many"}),
        (
            Annotated[str, Described()],
            {"type": "string", "description": "from a field", "title": "Field title"},
        ),
    ],
)
def test_schema_of_plain_types(tp: Any, expected: dict[str, Any]) -> None:
    assert check(type_schema(tp)) == expected


def test_schema_enum_lists_its_values_and_its_docstring() -> None:
    assert type_schema(Color) == {
        "enum": ["red", "green"], "type": "string", "description": "A primary colour."
    }


def test_schema_attrs_class_has_fields_required_defaults_and_attribute_docs() -> None:
    assert check(type_schema(Point)) == {
        "type": "object",
        "description": "A point on the plane.",
        "properties": {
            "x": {"type": "integer", "description": "Distance across."},
            "y": {"type": "integer", "description": "Distance down, from the top.", "default": 0},
        },
        "required": ["x"],
    }


def test_schema_dataclass_nests_and_serializes_defaults() -> None:
    schema = check(type_schema(Shape))
    assert schema["required"] == ["name", "points"]
    assert schema["properties"]["points"]["items"] == type_schema(Point)
    assert schema["properties"]["color"]["default"] == "red"
    assert "default" not in schema["properties"]["tags"]  # a factory has no fixed default
    assert "description" not in schema  # not the signature dataclasses writes as __doc__
    assert valid(schema, {"name": "s", "points": [{"x": 1}], "color": "green"})
    assert not valid(schema, {"name": "s", "points": [{"x": "1"}]})


def test_schema_typeddict_required_and_optional_keys() -> None:
    assert check(type_schema(Options)) == {
        "type": "object",
        "description": "Display options.",
        "properties": {"verbose": {"type": "boolean"}, "depth": {"type": "integer"}},
        "required": ["verbose"],
    }
    assert "required" not in type_schema(Loose)


def test_schema_recursive_type_goes_to_defs_with_ref() -> None:
    schema = check(type_schema(Node))
    assert schema == {
        "$ref": "#/$defs/Node",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["value"],
            }
        },
    }
    assert valid(schema, {"value": 1, "children": [{"value": 2, "children": []}]})
    assert not valid(schema, {"value": 1, "children": [{"value": "two"}]})


def test_schema_mutually_recursive_types_terminate() -> None:
    schema = check(type_schema(Even))
    assert set(schema["$defs"]) == {"Even"}
    odd = schema["$defs"]["Even"]["properties"]["odd"]["anyOf"][0]
    assert odd["properties"]["even"]["anyOf"][0] == {"$ref": "#/$defs/Even"}
    assert valid(schema, {"odd": {"even": {"odd": {"even": None}}}})
    assert not valid(schema, {"odd": {"even": {"odd": 3}}})


def test_schema_generic_attrs_class_substitutes_its_parameter() -> None:
    assert type_schema(Box[int])["properties"]["item"] == {"type": "integer"}
    assert type_schema(Box[Point])["properties"]["item"] == type_schema(Point)


def test_schema_def_names_never_collide() -> None:
    builder = SchemaBuilder()
    first = builder._def_name(Node)
    other = attrs.make_class("Node", {"x": attrs.field()})
    assert builder._def_name(other) == "Node2" and builder._def_name(Node) == first


def test_schema_unknown_type_is_open() -> None:
    class Opaque:
        pass

    assert type_schema(Opaque) == {}


# --- docstrings ---------------------------------------------------------------------------


def test_docstring_sections_google_style() -> None:
    doc = """Do a thing.

    More words.

    Args:
        name (str): The name,
            continued here.
        count: How many.

    Returns:
        Something.
    """
    summary, sections = docstring_sections(doc)
    assert summary == "Do a thing.\n\nMore words."
    assert sections["Args"] == {"name": "The name, continued here.", "count": "How many."}
    assert docstring_args(doc) == sections["Args"]
    assert docstring_args(None) == {}


# --- signatures ---------------------------------------------------------------------------


class Ctx:
    pass


def test_signature_input_schema_with_descriptions_defaults_and_context() -> None:
    def tool(
        ctx: Ctx,
        shape: Shape,
        mode: Literal["fast", "slow"] = "fast",
        scale: Annotated[float, "Zoom factor"] = 1.0,
        tree: Node | None = None,
    ) -> str:
        """Draw.

        Args:
            shape: What to draw.
            scale: Ignored: Annotated wins.
        """
        return ""

    sig = analyze_signature(tool, context_type=Ctx)
    schema = check(sig.input_schema)
    assert sig.context_param == "ctx"
    assert list(schema["properties"]) == ["shape", "mode", "scale", "tree"]
    assert schema["required"] == ["shape"]
    assert schema["properties"]["shape"]["description"] == "What to draw."
    assert schema["properties"]["mode"] == {"enum": ["fast", "slow"], "type": "string", "default": "fast"}
    assert schema["properties"]["scale"] == {
        "type": "number", "description": "Zoom factor", "default": 1.0
    }
    assert schema["properties"]["tree"]["anyOf"][0] == {"$ref": "#/$defs/Node"}
    assert "Node" in schema["$defs"]
    assert sig.output is None  # str is text, not structured output


def test_signature_docstring_describes_a_parameter_better_than_its_type() -> None:
    def tool(start: Point, end: Annotated[Point, "Where to stop"], other: Point) -> None:
        """Go.

        Args:
            start: Where to begin.
            end: Ignored: Annotated wins.
        """

    props = analyze_signature(tool, context_type=Ctx).input_schema["properties"]
    assert props["start"]["description"] == "Where to begin."
    assert props["end"]["description"] == "Where to stop"
    assert props["other"]["description"] == "A point on the plane."  # the type's own


def test_signature_only_non_primitive_parameters_are_structured() -> None:
    def tool(a: int, b: str, c: float | None, d: bool, e: Literal["x", "y"], f: list[Any],
             g: dict[str, Any], h: Any, p: Point, q: list[int], r: Literal["z"]) -> None:
        pass

    sig = analyze_signature(tool, context_type=Ctx)
    assert [name for name, _, _ in sig.binder.structured] == ["p", "q", "r"]
    assert not needs_structuring(int) and needs_structuring(Color)


# --- structuring --------------------------------------------------------------------------


def bind(fn: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    return analyze_signature(fn, context_type=Ctx).binder(arguments)


def test_structure_nested_classes_arrive_as_their_types() -> None:
    def tool(shape: Shape, opts: Options, tree: Node, colors: set[Color],
             pair: tuple[int, Point], by_name: dict[str, Point], box: Box[Point]) -> None:
        pass

    kwargs = bind(tool, {
        "shape": {"name": "s", "points": [{"x": 1}, {"x": 2, "y": 3}], "color": "green"},
        "opts": {"verbose": True, "depth": 2},
        "tree": {"value": 1, "children": [{"value": 2}]},
        "colors": ["red"],
        "pair": [1, {"x": 5}],
        "by_name": {"a": {"x": 7}},
        "box": {"item": {"x": 9}},
        "ignored": 1,
    })
    assert kwargs["shape"] == Shape("s", [Point(1), Point(2, 3)], Color.GREEN)
    assert kwargs["opts"] == {"verbose": True, "depth": 2}
    assert kwargs["tree"] == Node(1, [Node(2)])
    assert kwargs["colors"] == {Color.RED}
    assert kwargs["pair"] == (1, Point(5))
    assert kwargs["by_name"] == {"a": Point(7)}
    assert kwargs["box"] == Box(Point(9))
    assert "ignored" not in kwargs


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"shape": {"name": "s", "points": [{"x": "1"}]}},
         "argument 'shape.points[0].x': expected an integer, got string"),
        ({"shape": {"name": "s", "points": [{}]}}, "argument 'shape.points[0].x' is required"),
        ({"shape": {"name": "s", "points": [], "color": "blue"}},
         "argument 'shape.color': expected one of [\"red\", \"green\"], got \"blue\""),
        ({"shape": "square"}, "argument 'shape': expected Shape or null, got string"),
        ({"opts": {"verbose": 1}}, "argument 'opts.verbose': expected a boolean, got integer"),
        ({"opts": {}}, "argument 'opts.verbose' is required"),
        ({"tree": {"value": 1, "children": [{"value": 2, "children": [{"value": None}]}]}},
         "argument 'tree.children[0].children[0].value': expected an integer, got null"),
        ({"by_name": {"a b": {"x": True}}},
         "argument 'by_name[\"a b\"].x': expected an integer, got boolean"),
        ({"pair": [1]}, "argument 'pair': expected 2 items, got 1"),
        ({"ids": ["1"]}, "argument 'ids[0]': expected an integer, got string"),
        ({"level": 1.0}, "argument 'level': expected Level or null, got number"),
        ({"level": 3}, "argument 'level': expected one of [1, 2], got 3"),
    ],
)
def test_structure_errors_name_the_argument_path(arguments: dict[str, Any], message: str) -> None:
    def tool(shape: Shape | None = None, opts: Options | None = None, tree: Node | None = None,
             by_name: dict[str, Point] | None = None, pair: tuple[int, str] | None = None,
             ids: list[int] | None = None, level: Level | None = None) -> None:
        pass

    with pytest.raises(ArgumentError) as info:
        bind(tool, arguments)
    assert str(info.value) == message


def test_structure_reports_at_most_three_problems() -> None:
    def tool(ids: list[int]) -> None:
        pass

    with pytest.raises(ArgumentError, match=r"ids\[2\].*\(and 2 more\)$"):
        bind(tool, {"ids": ["a", "b", "c", "d", "e"]})


def test_structure_is_strict_about_json_kinds() -> None:
    assert converter.structure(1, float) == 1.0
    for value, tp in [("1", int), (True, int), (1, bool), (1, str), ("a", list[str]),
                      ({"x": 1}, list[int]), (1, Literal["1"]), (True, Literal[1]), (1, Color)]:
        with pytest.raises(Exception):  # noqa: B017 - any structure error
            converter.structure(value, tp)


def test_structure_union_picks_the_member_that_fits() -> None:
    @attrs.define
    class Small:
        x: int

    @attrs.define
    class Big:
        x: int
        y: int

    assert converter.structure({"x": 1, "y": 2}, Small | Big) == Big(1, 2)
    assert converter.structure({"x": 1}, Small | Big) == Small(1)
    assert converter.structure(3, int | Point) == 3
    assert converter.structure({"x": 3}, int | Point) == Point(3)
    with pytest.raises(Exception, match="expected integer or Point, got string"):
        converter.structure("3", int | Point)


def test_structure_literal_of_enum_members_gives_the_member() -> None:
    assert converter.structure("red", Literal[Color.RED]) is Color.RED


# --- output -------------------------------------------------------------------------------


def test_output_object_type_is_not_wrapped() -> None:
    shape = output_shape(Point)
    assert shape is not None and not shape.wrap
    assert check(shape.schema) == type_schema(Point)
    assert shape.structured(Point(1, 2)) == ({"x": 1, "y": 2}, {"x": 1, "y": 2})


def test_output_non_object_type_is_wrapped_in_result() -> None:
    shape = output_shape(list[Point])
    assert shape is not None and shape.wrap
    assert check(shape.schema) == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": type_schema(Point)}},
        "required": ["result"],
    }
    data, structured = shape.structured([Point(1)])
    assert structured == {"result": [{"x": 1, "y": 0}]} and data == [{"x": 1, "y": 0}]
    assert valid(shape.schema, structured)


def test_output_recursive_root_keeps_type_object() -> None:
    shape = output_shape(Node)
    assert shape is not None and not shape.wrap
    assert check(shape.schema)["type"] == "object" and shape.schema["$ref"] == "#/$defs/Node"
    _, structured = shape.structured(Node(1, [Node(2)]))
    assert valid(shape.schema, structured)


def test_output_none_and_any_have_no_schema() -> None:
    assert output_shape(None) is None and output_shape(Any) is None
    assert output_shape(type(None)) is None


def test_output_values_already_json_are_passed_through_uncopied() -> None:
    for tp, value in [(dict[str, Any], {"a": [1]}), (list[dict[str, int]], [{"a": 1}]),
                      (int, 3), (dict[str, list[str] | None], {"a": None})]:
        shape = output_shape(tp)
        assert shape is not None and shape.serialize(value) is value
    shape = output_shape(list[Point])
    assert shape is not None and shape.serialize([Point(1)]) == [{"x": 1, "y": 0}]


def test_output_sets_tuples_and_enums_serialize_as_json() -> None:
    shape = output_shape(tuple[set[int], Color])
    assert shape is not None
    assert shape.structured(({1}, Color.GREEN))[1] == {"result": [[1], "green"]}


# --- the cheap check ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
         "required": ["a"]},
        {"type": "object", "properties": {"a": {"type": ["integer", "null"]},
                                          "b": {"enum": [1, "x"]}}, "additionalProperties": False},
        {"type": "object", "properties": {"a": {"type": "mystery"}, "b": True}},
        {"type": "object"},
        {"type": "object", "properties": "junk", "required": "ab"},
    ],
)
def test_compile_check_answers_exactly_as_check_arguments(schema: dict[str, Any]) -> None:
    compiled = compile_check(schema)
    cases: list[dict[str, Any]] = [
        {}, {"a": 1}, {"a": True}, {"a": 1.5, "b": "x"}, {"a": None}, {"a": 1, "b": 1},
        {"a": 1, "b": 2}, {"a": 1, "c": 3}, {"a": "1"}, {"a": [], "b": {}},
    ]
    for arguments in cases:
        assert compiled(arguments) == check_arguments(schema, arguments), arguments


# --- pydantic (optional) -------------------------------------------------------------------


def test_pydantic_model_uses_its_own_schema_and_validation() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Item(pydantic.BaseModel):
        name: str
        qty: int = pydantic.Field(ge=1, description="How many")

    class Order(pydantic.BaseModel):
        items: list[Item]

    def tool(order: Order) -> Order:
        return order

    tool.__annotations__ = {"order": Order, "return": Order}  # local classes: no strings

    sig = analyze_signature(tool, context_type=Ctx)
    schema = check(sig.input_schema)
    assert schema["properties"]["order"]["properties"]["items"]["items"] == {"$ref": "#/$defs/Item"}
    assert schema["$defs"]["Item"]["properties"]["qty"]["minimum"] == 1
    order = sig.binder({"order": {"items": [{"name": "a", "qty": 2}]}})["order"]
    assert isinstance(order, Order) and order.items[0].qty == 2
    with pytest.raises(ArgumentError, match=r"argument 'order\.items\[0\]\.qty': .*greater than"):
        sig.binder({"order": {"items": [{"name": "a", "qty": 0}]}})
    assert sig.output is not None and not sig.output.wrap
    assert sig.output.structured(order)[1] == {"items": [{"name": "a", "qty": 2}]}


def test_pydantic_defs_never_clash_with_ours() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Node(pydantic.BaseModel):  # the same name as our recursive attrs Node
        label: str
        next: Node | None = None

    Node.model_rebuild()

    def tool(ours: Any, theirs: Any) -> None:
        pass

    tool.__annotations__ = {"ours": globals()["Node"], "theirs": Node}
    schema = check(analyze_signature(tool, context_type=Ctx).input_schema)
    assert set(schema["$defs"]) == {"Node", "Node2"}
    assert schema["properties"]["ours"] == {"$ref": "#/$defs/Node"}
    theirs = schema["properties"]["theirs"]["$ref"]
    assert theirs == "#/$defs/Node2"
    assert schema["$defs"]["Node2"]["properties"]["label"]["type"] == "string"
    assert valid(schema, {"ours": {"value": 1}, "theirs": {"label": "a", "next": {"label": "b"}}})
    assert not valid(schema, {"ours": {"value": 1}, "theirs": {"label": "a", "next": {"x": 1}}})

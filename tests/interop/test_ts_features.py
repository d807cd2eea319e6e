"""The TypeScript SDK's client (1.32.x) -> ``examples/everything_server.py``, every feature.

``node/ts_features_client.mjs`` drives our everything server over stdio through
resources (list, templates, read, subscribe, updates), prompts, completion, logging,
roots (from the TS client, with list changes), tool list changes, content kinds and
elicitation (form, defaults, enums, URL mode); each test checks one part of its report,
and every message our server sent it validates against the 2025-11-25 schema.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from . import _support
from ._support import error_code, ok, text_of

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def report(node: str) -> dict[str, Any]:
    return _support.run_report(
        [node, str(_support.TS_FEATURES_CLIENT), sys.executable, str(_support.EVERYTHING_SERVER)]
    )


def test_ts_features_capabilities(report: dict[str, Any]) -> None:
    assert report["server_info"]["name"] == "trio-mcp-everything"
    assert report["server_capabilities"] == {
        "logging": {}, "completions": {}, "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True}, "tools": {"listChanged": True},
        # The tasks extension's fixture tools (slow_compute...) also run as 2025-11-25 tasks.
        "tasks": {"cancel": {}, "list": {}, "requests": {"tools": {"call": {}}}},
    }


def test_ts_features_resources(report: dict[str, Any]) -> None:
    uris = [r["uri"] for r in ok(report["resources"])["resources"]]
    assert uris == ["test://static-text", "test://static-binary", "test://watched-resource"]
    templates = ok(report["templates"])["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["test://template/{id}/data"]
    assert ok(report["read_text"])["contents"] == [{
        "uri": "test://static-text", "mimeType": "text/plain",
        "text": "This is the content of the static text resource.",
    }]
    assert ok(report["read_blob"])["contents"][0]["blob"].startswith("iVBOR")
    data = ok(report["read_template"])["contents"][0]
    assert json.loads(data["text"]) == {"id": "123", "templateTest": True,
                                        "data": "Data for ID: 123"}
    assert error_code(report["read_unknown"]) == -32002
    assert report["read_unknown"]["data"] == {"uri": "test://nonexistent"}


def test_ts_features_subscription(report: dict[str, Any]) -> None:
    assert ok(report["subscribe"]) == {} and ok(report["unsubscribe"]) == {}
    assert text_of(ok(report["update"])) == "notified 1 subscriber(s)"
    assert report["updated"] == ["test://watched-resource"]
    assert ok(report["read_watched"])["contents"][0]["text"] == "from TS"


def test_ts_features_prompts(report: dict[str, Any]) -> None:
    prompts = {p["name"]: p for p in ok(report["prompts"])["prompts"]}
    assert prompts["test_prompt_with_arguments"]["arguments"] == [
        {"name": "arg1", "description": "First test argument", "required": True},
        {"name": "arg2", "description": "Second test argument", "required": True},
    ]
    assert ok(report["prompt_args"])["messages"] == [{"role": "user", "content": {
        "type": "text", "text": "Prompt with arguments: arg1='x', arg2='y'"}}]
    assert error_code(report["prompt_missing"]) == -32602
    image = ok(report["prompt_image"])["messages"]
    assert [m["content"]["type"] for m in image] == ["image", "text"]
    embedded = ok(report["prompt_embedded"])["messages"][0]["content"]
    assert embedded["type"] == "resource" and embedded["resource"]["uri"] == "test://e"


def test_ts_features_completion(report: dict[str, Any]) -> None:
    assert ok(report["complete_prompt"])["completion"] == {
        "values": ["alpha", "alpine"], "total": 2, "hasMore": False}
    context = ok(report["complete_context"])["completion"]
    assert len(context["values"]) == 100 and context["values"][0] == "gamma-0"
    assert context["total"] == 150 and context["hasMore"] is True
    assert ok(report["complete_template"])["completion"]["values"] == ["456"]


def test_ts_features_logging(report: dict[str, Any]) -> None:
    logs = report["logs"]
    assert [m["data"] for m in logs[:3]] == [
        "Tool execution started", "Tool processing data", "Tool execution completed"]
    after = logs[report["logs_before_levels"]:]
    levels = [m["level"] for m in after if isinstance(m["data"], dict)]
    assert levels == ["error", "critical", "alert", "emergency"]


def test_ts_features_roots(report: dict[str, Any]) -> None:
    assert ok(report["roots_tool"])["structuredContent"] == {
        "roots": [{"uri": "file:///work", "name": "work"}]}
    assert any(m["data"] == "roots changed" for m in report["logs"])
    assert ok(report["roots_tool_after"])["structuredContent"] == {
        "roots": [{"uri": "file:///tmp", "name": "tmp"}]}
    assert report["roots_requests"] == 2


def test_ts_features_list_changes_and_content(report: dict[str, Any]) -> None:
    assert report["list_changed"] == ["tools"]
    names = [t["name"] for t in ok(report["tools"])["tools"]]
    assert "test_dynamic_tool" in names
    assert text_of(ok(report["dynamic"])) == "I come and go"
    content = {name: ok(entry) for name, entry in report["content"].items()}
    kinds = {name: [b["type"] for b in result["content"]] for name, result in content.items()}
    assert kinds == {
        "test_image_content": ["image"], "test_audio_content": ["audio"],
        "test_embedded_resource": ["resource"],
        "test_multiple_content_types": ["text", "image", "resource"],
        "test_resource_link": ["resource_link"], "test_error_handling": ["text"],
        "test_simple_text": ["text"],
    }
    assert content["test_error_handling"]["isError"] is True
    assert text_of(ok(report["sampling"])) == "LLM response: sampled by the TS client"


def test_ts_features_elicitation(report: dict[str, Any]) -> None:
    assert text_of(ok(report["elicit_form"])) == (
        'User response: action=accept, content={"response":"yes"}')
    assert text_of(ok(report["elicit_defaults"])) == (
        'Elicitation completed: action=accept, content={"name":"Ann","age":31}')
    assert "titledMulti" in text_of(ok(report["elicit_enums"]))
    modes = [e.get("mode") for e in report["elicitations"]]
    assert modes == ["form", "form", "form", "url"]
    url = report["elicitations"][3]
    assert url["url"] == "https://example.com/consent"
    assert report["elicitation_complete"] == [url["elicitationId"]]
    assert text_of(ok(report["elicit_url"])).endswith(url["elicitationId"])


def test_ts_features_every_message_we_sent_validates(
    report: dict[str, Any], schema: dict[str, Any]
) -> None:
    problems, checked = _support.WireChecker(schema).violations(report["wire"], "in")
    assert checked > 50
    assert problems == []
    sent = {m["msg"].get("method") for m in report["wire"] if m["dir"] == "in"}
    assert {"notifications/message", "notifications/resources/updated",
            "notifications/tools/list_changed", "notifications/elicitation/complete",
            "roots/list", "elicitation/create", "sampling/createMessage"} <= sent

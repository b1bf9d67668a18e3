"""How an MCP result becomes the text the model reads: every content kind, nothing inlined
that is not text."""

from __future__ import annotations

import base64

import mcp_types as types

from gateway.capabilities.mcp_tools import prefixed_name, render_result


def test_every_content_kind_is_text_or_a_one_line_description():
    png = base64.b64encode(b"\x89PNG" + b"\x00" * 1020).decode()
    result = types.CallToolResult(
        content=[
            types.TextContent(text="first"),
            types.ImageContent(data=png, mime_type="image/png"),
            types.AudioContent(data=png, mime_type="audio/wav"),
            types.ResourceLink(name="report", uri="file:///r.pdf"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="mem://a", text="inline text")
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(
                    uri="mem://b", blob=png, mime_type="application/zip"
                )
            ),
        ]
    )
    assert render_result(result).splitlines() == [
        "first",
        "[image image/png, 1,024 bytes, not shown]",
        "[audio audio/wav, 1,024 bytes, not shown]",
        "[resource report: file:///r.pdf]",
        "[resource mem://a]",
        "inline text",
        "[binary resource mem://b (application/zip), not shown]",
    ]
    assert png not in render_result(result)


def test_structured_only_and_empty_results():
    structured = types.CallToolResult(content=[], structured_content={"temp": 21, "unit": "C"})
    assert render_result(structured) == '{"temp": 21, "unit": "C"}'
    assert render_result(types.CallToolResult(content=[])) == "(the tool returned nothing)"


def test_names_are_prefixed_cleaned_and_capped():
    assert prefixed_name("cal", "list_events") == "cal__list_events"
    assert prefixed_name("cal", "list.events v2") == "cal__list_events_v2"
    assert len(prefixed_name("cal", "x" * 100)) == 64

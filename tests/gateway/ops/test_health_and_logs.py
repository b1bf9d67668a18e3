"""/healthz, /readyz and /metrics of a running gateway; log lines carry ids and no secrets."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import aiohttp
import pytest

from gateway.agent.metrics import Registry
from gateway.agent.providers import build_provider
from gateway.ops.logs import setup_logging, turn_scope
from gateway.pipeline.gateway import Gateway
from gateway.pipeline.health import HealthServer
from tests.conftest import TEST_KEY, AllowAll, llm_overrides
from tests.fakes.channel import RecordingChannel

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_prometheus(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A strict little parser of the text format: every sample belongs to a declared family."""
    types: dict[str, str] = {}
    samples = {}
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped")
            types[name] = kind
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, _, label_text, value = match.groups()
        labels: list[tuple[str, str]] = []
        rest = label_text or ""
        while rest:
            label = LABEL.match(rest)
            assert label, f"bad labels in {line!r}"
            labels.append((label.group(1), _canonical(label.group(1), label.group(2))))
            rest = rest[label.end() :]
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or (family in types and types[family] == "histogram"), name
        samples[(name, tuple(sorted(labels)))] = float(value)
    return samples


def _canonical(name: str, text: str) -> str:
    """Label order and the spelling of bucket bounds (1 or 1.0) carry no meaning."""
    if name == "le" and text != "+Inf":
        return repr(float(text))
    return text


def value(samples, name: str, **labels: str) -> float:
    key = tuple(sorted((k, _canonical(k, v)) for k, v in labels.items()))
    return samples.get((name, key), 0.0)


class SwitchableChannel(RecordingChannel):
    """A channel that reports readiness, like an adapter whose platform can go away."""

    def __init__(self) -> None:
        super().__init__()
        self.set_ready(True, "polling")


@pytest.fixture
async def running(
    anthropic_server, make_settings
) -> Iterator[tuple[Gateway, HealthServer, SwitchableChannel]]:
    channel = SwitchableChannel()
    settings = make_settings(**llm_overrides(anthropic_server))
    gateway = Gateway.build(
        settings, build_provider(settings), channels=[channel], access=AllowAll()
    )
    await gateway.start()
    health = HealthServer(gateway.parts, "127.0.0.1", 0)
    await health.start()
    yield gateway, health, channel
    await health.stop()
    await gateway.stop()


async def get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as client, client.get(url) as response:
        return response.status, response.headers["Content-Type"], await response.text()


async def test_health_and_readiness_follow_the_channel(running):
    gateway, health, channel = running
    status, _, body = await get(health.url + "/healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"

    status, _, body = await get(health.url + "/readyz")
    report = json.loads(body)
    assert status == 200 and report["ready"] is True
    assert report["channels"]["fakechat"] == {"ready": True, "detail": "polling"}
    assert report["state_db"]["ready"] is True

    channel.set_ready(False, "Bot API unreachable")
    status, _, body = await get(health.url + "/readyz")
    report = json.loads(body)
    assert status == 503 and report["ready"] is False
    assert report["channels"]["fakechat"] == {"ready": False, "detail": "Bot API unreachable"}
    _, _, text = await get(health.url + "/metrics")
    assert value(parse_prometheus(text), "clawgate_channel_ready", channel="fakechat") == 0

    channel.set_ready(True, "polling")
    status, _, _ = await get(health.url + "/readyz")
    assert status == 200
    await gateway.state.close()  # the state database becomes unreachable
    status, _, body = await get(health.url + "/readyz")
    assert status == 503 and json.loads(body)["state_db"]["ready"] is False


async def test_metrics_parse_and_counters_move(running, anthropic_server):
    gateway, health, channel = running
    status, content_type, text = await get(health.url + "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    before = parse_prometheus(text)
    assert value(before, "clawgate_turns_total", outcome="ok") == 0

    anthropic_server.reply_tool_call("write_file", {"path": "MEMORY.md", "content": "- tea\n"})
    anthropic_server.reply_text("Saved.")
    await channel.inject("gus", "remember tea")
    await channel.wait_for(1)
    await gateway.lanes.drain()
    gateway.metrics.heartbeat("ok")  # the hooks other parts call
    gateway.metrics.observe_search(0.004)

    after = parse_prometheus((await get(health.url + "/metrics"))[2])
    assert value(after, "clawgate_turns_total", outcome="ok") == 1
    assert value(after, "clawgate_tool_calls_total", tool="write_file", outcome="ok") == 1
    assert value(after, "clawgate_provider_request_seconds_count", provider="anthropic") == 2
    assert value(after, "clawgate_tokens_total", direction="in") > 0
    assert value(after, "clawgate_tokens_total", direction="out") > 0
    assert value(after, "clawgate_deliveries_total", channel="fakechat", outcome="ok") == 1
    assert value(after, "clawgate_heartbeats_total", outcome="ok") == 1
    assert value(after, "clawgate_memory_search_seconds_count") == 1
    assert value(after, "clawgate_workspace_commits_total", reason="turn") == 1
    assert value(after, "clawgate_queue_depth") == 0
    assert value(after, "clawgate_channel_ready", channel="fakechat") == 1
    inf = value(after, "clawgate_turn_seconds_bucket", le="+Inf")
    assert inf == value(after, "clawgate_turn_seconds_count") == 1


async def test_provider_errors_are_counted(running, anthropic_server):
    _, health, channel = running
    anthropic_server.reply_error(
        401, {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}
    )
    await channel.inject("hal", "hello")
    await channel.wait_for(1)
    samples = parse_prometheus((await get(health.url + "/metrics"))[2])
    assert value(samples, "clawgate_provider_errors_total", provider="anthropic", kind="auth") == 1
    assert value(samples, "clawgate_turns_total", outcome="provider_error") == 1


def test_registry_renders_labels_and_histograms():
    registry = Registry()
    counter = registry.counter("x_total", "Help with \\ and\nnewline.", ["who"])
    counter.inc(who='a "quoted" name')
    hist = registry.histogram("lat_seconds", "Latency.", buckets=(0.1, 1))
    hist.observe(0.5)
    hist.observe(5)
    samples = parse_prometheus(registry.render())
    assert value(samples, "x_total", who='a \\"quoted\\" name') == 1
    assert value(samples, "lat_seconds_bucket", le="0.1") == 0
    assert value(samples, "lat_seconds_bucket", le="1") == 1
    assert value(samples, "lat_seconds_bucket", le="+Inf") == 2
    assert value(samples, "lat_seconds_sum") == 5.5
    with pytest.raises(ValueError):
        counter.inc(-1, who="a")


async def test_logs_at_the_default_level_carry_ids_and_no_secrets(anthropic_server, make_settings):
    telegram_token = "123456789:AAH-telegram-token-secret-0123456789"
    settings = make_settings(
        **llm_overrides(anthropic_server),
        telegram={"token": telegram_token},
        log_redact=["hunter2-extra"],
    )
    stream = io.StringIO()
    handler = setup_logging(settings, stream=stream)
    try:
        channel = RecordingChannel()
        gateway = Gateway.build(
            settings, build_provider(settings), channels=[channel], access=AllowAll()
        )
        await gateway.start()
        body = "my bank password is swordfish-4711"
        anthropic_server.reply_tool_call("write_file", {"path": "MEMORY.md", "content": body})
        anthropic_server.reply_text("Saved.")
        await channel.inject("ivy", body)
        await channel.wait_for(1)
        await gateway.lanes.drain()
        # A library that logs a request URL with the token in it (the Bot API does), and a
        # careless error message with a key: the formatter masks both.
        logging.getLogger("somelib").warning(
            "POST https://api.telegram.org/bot%s/getUpdates", telegram_token
        )
        logging.getLogger("gateway.pipeline.gateway").error(
            "auth failed with key %s and %s", TEST_KEY, "hunter2-extra"
        )
        await gateway.stop()
    finally:
        logging.getLogger().removeHandler(handler)
    output = stream.getvalue()
    assert "turn started" in output and "turn finished" in output
    for secret in (telegram_token, TEST_KEY, "hunter2-extra", "swordfish-4711"):
        assert secret not in output
    assert "[redacted]" in output
    turn_lines = [line for line in output.splitlines() if "turn finished" in line]
    assert re.search(r"\[fakechat:ivy:dm [0-9a-f]{8}\]|\[\S+ [0-9a-f]{8}\]", turn_lines[0])


def test_json_log_lines(make_settings):
    settings = make_settings(log_format="json")
    stream = io.StringIO()
    handler = setup_logging(settings, stream=stream)
    try:
        with turn_scope("ana:dm", "abcd1234"):
            logging.getLogger("gateway.test").info("one event")
        logging.getLogger("gateway.test").info("outside a turn")
    finally:
        logging.getLogger().removeHandler(handler)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["session"] == "ana:dm" and first["turn"] == "abcd1234"
    assert first["msg"] == "one event" and first["level"] == "INFO"
    assert second["session"] == "-" and second["turn"] == "-"


async def test_invented_tool_names_do_not_add_metric_series(running, anthropic_server):
    """The model controls tool names; /metrics label values come from the tools that exist."""
    gateway, health, channel = running
    # list_files first: past step_max_tool_calls (32) the rest get "not run" results, which
    # are counted under their (invented) names all the same.
    anthropic_server.reply_tool_calls(
        [("list_files", {}, None)] + [(f"invented_tool_{i}", {}, None) for i in range(200)]
    )
    anthropic_server.reply_text("Done.")
    await channel.inject("gus", "call everything")
    await channel.wait_for(1)
    await gateway.lanes.drain()
    text = (await get(health.url + "/metrics"))[2]
    series = [line for line in text.splitlines() if line.startswith("clawgate_tool_calls_total{")]
    assert not [line for line in series if "invented_tool" in line]
    samples = parse_prometheus(text)
    assert value(samples, "clawgate_tool_calls_total", tool="other", outcome="error") == 200
    assert value(samples, "clawgate_tool_calls_total", tool="list_files", outcome="ok") == 1
    assert len(series) == 2

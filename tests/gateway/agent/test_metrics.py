"""The metric set on prometheus_client: no process-global registry, a fixed tool label set."""

from __future__ import annotations

import prometheus_client

from gateway.agent.conversation import Message
from gateway.agent.metrics import OTHER, GatewayMetrics


def _tool(name: str) -> Message:
    return Message("tool", "done", tool_call_id="c1", tool_name=name)


def test_unknown_tool_names_are_counted_as_other():
    metrics = GatewayMetrics(["read_file"])
    metrics.tool_result(_tool("read_file"))
    for invented in ("x1", "x2", "x3"):
        metrics.tool_result(_tool(invented))
    assert metrics.tool_calls.value(tool="read_file", outcome="ok") == 1
    assert metrics.tool_calls.value(tool=OTHER, outcome="ok") == 3
    text = metrics.render()
    assert 'tool="x1"' not in text and f'tool="{OTHER}"' in text
    metrics.register_tools(["x1"])
    metrics.tool_result(_tool("x1"))
    assert metrics.tool_calls.value(tool="x1", outcome="ok") == 1


def test_two_gateways_in_one_process_keep_separate_metrics():
    first, second = GatewayMetrics(), GatewayMetrics()
    first.turns.inc(outcome="ok")
    assert first.turns.value(outcome="ok") == 1 and second.turns.value(outcome="ok") == 0
    default = prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
    assert "clawgate_" not in default


def test_scrape_time_values_add_to_counted_ones():
    metrics = GatewayMetrics()
    metrics.delivery_retry("telegram")
    metrics.delivery_retries.collect_with(lambda: {("telegram",): 2.0, ("discord",): 1.0})
    assert metrics.delivery_retries.value(channel="telegram") == 3
    text = metrics.render()
    assert 'clawgate_delivery_retries_total{channel="discord"} 1.0' in text
    assert "# TYPE clawgate_turn_seconds histogram" in text


def test_samples_list_each_series_for_the_panel():
    metrics = GatewayMetrics()
    metrics.turns.inc(outcome="ok")
    metrics.turns.inc(outcome="ok")
    metrics.turns.inc(outcome="provider_error")
    assert list(metrics.turns.samples()) == [("", ("ok",), 2.0), ("", ("provider_error",), 1.0)]

"""A tiny metrics registry (counters, gauges, histograms) and the gateway's metric set.

No global state: a `Registry` is a plain object and the `Gateway` owns one `GatewayMetrics`.
`Registry.render()` writes the Prometheus text exposition format (version 0.0.4), which is all
`/metrics` needs; nothing here depends on a Prometheus client library.

Hooks for parts built elsewhere, one line each:
    gateway.metrics.heartbeat("delivered")            # heartbeat/: one beat and its outcome
    gateway.metrics.observe_search(seconds)            # memory/: one recall search
    gateway.metrics.delivery_retry("telegram")         # delivery path: a send failed, retried

Label values come from fixed sets: a value the process does not know (a tool name the model
invented) is counted as `other` (`fixed_label`), so no input can add series without bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolSpec
from gateway.agent.providers.base import Provider, ProviderError

LabelValues = tuple[str, ...]
Sample = tuple[str, LabelValues, float]  # (name suffix, label values, value)
# Seconds: provider calls take 0.5-60 s, searches and turns' own work milliseconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


OTHER = "other"


def fixed_label(value: str, allowed: Collection[str]) -> str:
    """`value` if it is one of `allowed`, else "other": the one place label sets are bounded
    (a model that calls 200 invented tools must not add 200 permanent series)."""
    return value if value in allowed else OTHER


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value)) if value != int(value) else str(int(value))


class _Metric:
    kind = "untyped"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help_text
        self.labels = tuple(labels)
        self._values: dict[LabelValues, float] = {}
        self._collect: Callable[[], Mapping[LabelValues, float]] | None = None

    def _key(self, labels: Mapping[str, Any]) -> LabelValues:
        if set(labels) != set(self.labels):
            raise ValueError(f"{self.name} takes labels {self.labels}, got {tuple(labels)}")
        return tuple(str(labels[name]) for name in self.labels)

    def value(self, **labels: Any) -> float:
        """The current value for these labels (0 if never set); for tests and `status`."""
        return self._snapshot().get(self._key(labels), 0.0)

    def collect_with(self, fn: Callable[[], Mapping[LabelValues, float]]) -> None:
        """Compute the values at scrape time (queue depth, channel readiness...)."""
        self._collect = fn

    def _snapshot(self) -> dict[LabelValues, float]:
        values = dict(self._values)
        if self._collect is not None:
            for key, value in self._collect().items():
                values[key] = values.get(key, 0.0) + value
        return values

    def samples(self) -> Iterable[Sample]:
        for key, value in sorted(self._snapshot().items()):
            yield "", key, value


class Counter(_Metric):
    kind = "counter"

    def inc(self, amount: float = 1.0, **labels: Any) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount


class Gauge(_Metric):
    kind = "gauge"

    def set(self, value: float, **labels: Any) -> None:
        self._values[self._key(labels)] = value

    def inc(self, amount: float = 1.0, **labels: Any) -> None:
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = (),
                 buckets: Sequence[float] = LATENCY_BUCKETS) -> None:
        super().__init__(name, help_text, labels)
        self.buckets = tuple(sorted(buckets))
        self._series: dict[LabelValues, list[float]] = {}  # bucket counts..., sum, count

    def observe(self, value: float, **labels: Any) -> None:
        key = self._key(labels)
        series = self._series.setdefault(key, [0.0] * (len(self.buckets) + 2))
        for index, bound in enumerate(self.buckets):
            if value <= bound:
                series[index] += 1
        series[-2] += value
        series[-1] += 1

    def count(self, **labels: Any) -> float:
        series = self._series.get(self._key(labels))
        return series[-1] if series else 0.0

    def samples(self) -> Iterable[Sample]:
        for key, series in sorted(self._series.items()):
            for index, bound in enumerate(self.buckets):
                yield "_bucket", (*key, _number(bound)), series[index]
            yield "_bucket", (*key, "+Inf"), series[-1]
            yield "_sum", key, series[-2]
            yield "_count", key, series[-1]


class Registry:
    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}

    def _add(self, metric: _Metric) -> Any:
        if metric.name in self._metrics:
            raise ValueError(f"metric {metric.name} registered twice")
        self._metrics[metric.name] = metric
        return metric

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        return self._add(Counter(name, help_text, labels))

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Gauge:
        return self._add(Gauge(name, help_text, labels))

    def histogram(self, name: str, help_text: str, labels: Sequence[str] = (),
                  buckets: Sequence[float] = LATENCY_BUCKETS) -> Histogram:
        return self._add(Histogram(name, help_text, labels, buckets))

    def render(self) -> str:
        """Every metric in the Prometheus text format."""
        lines: list[str] = []
        for metric in self._metrics.values():
            lines.append(f"# HELP {metric.name} {_escape(metric.help)}")
            lines.append(f"# TYPE {metric.name} {metric.kind}")
            names = metric.labels + (("le",) if isinstance(metric, Histogram) else ())
            for suffix, values, value in metric.samples():
                pairs = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=False)]
                label_text = "{" + ",".join(pairs) + "}" if pairs else ""
                lines.append(f"{metric.name}{suffix}{label_text} {_number(value)}")
        return "\n".join(lines) + "\n"


class GatewayMetrics:
    """Everything an operator watches. Counters only go up; gauges are read at scrape time."""

    def __init__(self, tools: Iterable[str] = ()) -> None:
        # The tools that exist (registered by whoever builds a tool registry); anything else a
        # model names is `other`.
        self.known_tools: set[str] = set(tools)
        r = self.registry = Registry()
        self.turns = r.counter("clawgate_turns_total", "Turns run, by outcome.", ["outcome"])
        self.turn_seconds = r.histogram(
            "clawgate_turn_seconds", "Wall time of a turn, provider included.")
        self.tool_calls = r.counter(
            "clawgate_tool_calls_total", "Tool calls by tool and outcome.", ["tool", "outcome"])
        self.provider_seconds = r.histogram(
            "clawgate_provider_request_seconds",
            "Latency of one model call (retries included).", ["provider"])
        self.provider_errors = r.counter(
            "clawgate_provider_errors_total", "Model calls that failed, by error kind.",
            ["provider", "kind"])
        self.tokens = r.counter(
            "clawgate_tokens_total",
            "Tokens reported by the provider: in, out, cache_read, cache_write.",
            ["direction"])
        self.compactions = r.counter(
            "clawgate_compactions_total", "Session compactions by reason and result.",
            ["reason", "result"])
        self.flushes = r.counter(
            "clawgate_memory_flushes_total", "Silent memory flush turns, by outcome.", ["outcome"])
        self.heartbeats = r.counter(
            "clawgate_heartbeats_total", "Heartbeat runs by outcome.", ["outcome"])
        self.deliveries = r.counter(
            "clawgate_deliveries_total", "Replies handed to a channel, by outcome.",
            ["channel", "outcome"])
        self.delivery_retries = r.counter(
            "clawgate_delivery_retries_total", "Sends that failed and will be retried.",
            ["channel"])
        self.search_seconds = r.histogram(
            "clawgate_memory_search_seconds", "Latency of one recall search.")
        self.commits = r.counter(
            "clawgate_workspace_commits_total", "Workspace versioning commits, by reason.",
            ["reason"])
        self.queue_depth = r.gauge(
            "clawgate_queue_depth", "Turns and commands waiting or running, all sessions.")
        self.channel_ready = r.gauge(
            "clawgate_channel_ready", "1 if the channel is ready, else 0.", ["channel"])
        self.started = r.gauge(
            "clawgate_start_time_seconds", "Unix time the process started.")
        self.started.set(time.time())

    def render(self) -> str:
        return self.registry.render()

    # One-line hooks for other parts of the gateway.
    def heartbeat(self, outcome: str) -> None:
        self.heartbeats.inc(outcome=outcome)

    def observe_search(self, seconds: float) -> None:
        self.search_seconds.observe(seconds)

    def delivery_retry(self, channel: str) -> None:
        self.delivery_retries.inc(channel=channel)

    def register_tools(self, names: Iterable[str]) -> None:
        self.known_tools.update(names)

    def tool_result(self, message: Message) -> None:
        if message.role == "tool":
            outcome = "error" if message.is_error else "ok"
            tool = fixed_label(message.tool_name or "", self.known_tools)
            self.tool_calls.inc(tool=tool, outcome=outcome)


class MeteredProvider:
    """Wraps a provider to time each call and count tokens and errors; behaviour unchanged."""

    def __init__(self, inner: Provider, metrics: GatewayMetrics) -> None:
        self.inner = inner
        self.metrics = metrics

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    async def complete(
        self, system: SystemPrompt, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> Completion:
        started = time.perf_counter()
        try:
            completion = await self.inner.complete(system, messages, tools)
        except ProviderError as exc:
            self.metrics.provider_errors.inc(provider=self.name, kind=exc.kind)
            raise
        finally:
            self.metrics.provider_seconds.observe(time.perf_counter() - started,
                                                  provider=self.name)
        usage = completion.usage
        self.metrics.tokens.inc(usage.input_tokens, direction="in")
        self.metrics.tokens.inc(usage.output_tokens, direction="out")
        self.metrics.tokens.inc(usage.cache_read_tokens, direction="cache_read")
        self.metrics.tokens.inc(usage.cache_write_tokens, direction="cache_write")
        return completion

    async def close(self) -> None:
        await self.inner.close()

"""The gateway's metric set on `prometheus_client`, and the metered provider.

No global state: each `GatewayMetrics` has its own `CollectorRegistry` (nothing is put in
prometheus_client's default registry), and `render()` is prometheus_client's text format.
`Registry` is a thin facade that keeps metric definitions short and adds two things the
gateway needs: a fixed label set checked on every update, and values computed at scrape time
(`collect_with`: queue depth, channel readiness, retries counted inside channels).

Hooks for parts built elsewhere, one line each:
    gateway.metrics.heartbeat("delivered")            # heartbeat/: one beat and its outcome
    gateway.metrics.observe_search(seconds)            # memory/: one recall search
    gateway.metrics.delivery_retry("telegram")         # delivery path: a send failed, retried
    gateway.metrics.quota_refused("group_area")        # agent tools: a quota refused a call

Label values come from fixed sets: a value the process does not know (a tool name the model
invented) is counted as `other` (`fixed_label`), so no input can add series without bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, Protocol, TypeVar

import prometheus_client
from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolSpec, Usage
from gateway.agent.providers.base import Provider, ProviderError, TextStream
from gateway.agent.scope import TURN_KINDS, UsageScope, current_scope
from gateway.agent.tools.quota import QUOTA_KINDS

SHARED_WRITE_REASONS = ("unattended", "outside_text")

LabelValues = tuple[str, ...]
# Seconds: provider calls take 0.5-60 s, searches and turns' own work milliseconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
# Seconds: an outbox mark is one small commit, milliseconds (more under load).
MARK_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
OTHER = "other"


def fixed_label(value: str, allowed: Collection[str]) -> str:
    """`value` if it is one of `allowed`, else "other": the one place label sets are bounded
    (a model that calls 200 invented tools must not add 200 permanent series)."""
    return value if value in allowed else OTHER


class _Metric(Collector):
    """One prometheus_client metric (kept out of any registry) plus scrape-time values."""

    def __init__(self, inner: Any, labels: Sequence[str]) -> None:
        self.inner = inner
        self.labels = tuple(labels)
        self._collect: Callable[[], Mapping[LabelValues, float]] | None = None

    def _child(self, labels: Mapping[str, Any]) -> Any:
        if set(labels) != set(self.labels):
            raise ValueError(f"{self.inner._name} takes labels {self.labels}, got {tuple(labels)}")
        if not self.labels:
            return self.inner
        return self.inner.labels(**{name: str(labels[name]) for name in self.labels})

    def collect_with(self, fn: Callable[[], Mapping[LabelValues, float]]) -> None:
        """Add values computed at scrape time (queue depth, channel readiness...)."""
        self._collect = fn

    def _extra(self) -> dict[LabelValues, float]:
        return {tuple(map(str, k)): float(v) for k, v in (self._collect or dict)().items()}

    def value(self, **labels: Any) -> float:
        """The current value for these labels (0 if never set); for tests and `status`."""
        key = tuple(str(labels[name]) for name in self.labels) if labels else ()
        self._child(labels)  # validates the label names
        for metric in self.collect():
            for sample in metric.samples:
                if sample.name.endswith("_created"):
                    continue
                if tuple(sample.labels.get(n, "") for n in self.labels) == key:
                    return float(sample.value)
        return 0.0

    def samples(self) -> Iterator[tuple[str, LabelValues, float]]:
        """(name suffix, label values, value) per series, sorted by labels; a counter's
        `_total` is the empty suffix, `_created` series are left out. For the panel."""
        rows = []
        for metric in self.collect():
            for sample in metric.samples:
                suffix = sample.name[len(metric.name) :]
                if suffix == "_created":
                    continue
                if metric.type == "counter" and suffix == "_total":
                    suffix = ""
                key = tuple(sample.labels.get(n, "") for n in self.labels)
                rows.append((suffix, key, float(sample.value)))
        return iter(sorted(rows, key=lambda row: (row[1], row[0])))

    def collect(self) -> Iterable[Metric]:
        extra = self._extra()
        for metric in self.inner.collect():
            if extra:
                merged = []
                seen: set[LabelValues] = set()
                for sample in metric.samples:
                    key = tuple(sample.labels.get(n, "") for n in self.labels)
                    if sample.name.endswith("_created") or key not in extra:
                        merged.append(sample)
                        continue
                    seen.add(key)
                    merged.append(sample._replace(value=sample.value + extra[key]))
                sample_name = metric.name + ("_total" if metric.type == "counter" else "")
                for key, value in extra.items():
                    if key not in seen:
                        merged.append(
                            prometheus_client.samples.Sample(
                                sample_name, dict(zip(self.labels, key, strict=True)), value
                            )
                        )
                metric.samples = merged
            yield metric


class Counter(_Metric):
    def inc(self, amount: float = 1.0, **labels: Any) -> None:
        self._child(labels).inc(amount)


class Gauge(_Metric):
    def set(self, value: float, **labels: Any) -> None:
        self._child(labels).set(value)

    def inc(self, amount: float = 1.0, **labels: Any) -> None:
        self._child(labels).inc(amount)


class Histogram(_Metric):
    def observe(self, value: float, **labels: Any) -> None:
        self._child(labels).observe(value)

    def count(self, **labels: Any) -> float:
        key = tuple(str(labels[name]) for name in self.labels)
        self._child(labels)
        for metric in self.inner.collect():
            for sample in metric.samples:
                if (
                    sample.name.endswith("_count")
                    and tuple(sample.labels.get(n, "") for n in self.labels) == key
                ):
                    return float(sample.value)
        return 0.0


_M = TypeVar("_M", bound=_Metric)


class Registry:
    """A prometheus_client `CollectorRegistry` of its own, with short constructors."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._names: set[str] = set()

    def _add(self, metric: _M) -> _M:
        name = metric.inner._name
        if name in self._names:
            raise ValueError(f"metric {name} registered twice")
        self._names.add(name)
        self.registry.register(metric)
        return metric

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        return self._add(
            Counter(prometheus_client.Counter(name, help_text, labels, registry=None), labels)
        )

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Gauge:
        return self._add(
            Gauge(prometheus_client.Gauge(name, help_text, labels, registry=None), labels)
        )

    def histogram(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> Histogram:
        return self._add(
            Histogram(
                prometheus_client.Histogram(
                    name, help_text, labels, buckets=buckets, registry=None
                ),
                labels,
            )
        )

    def render(self) -> str:
        """Every metric in the Prometheus text format (prometheus_client's exposition)."""
        return prometheus_client.generate_latest(self.registry).decode("utf-8")


class GatewayMetrics:
    """Everything an operator watches. Counters only go up; gauges are read at scrape time."""

    def __init__(self, tools: Iterable[str] = ()) -> None:
        # The tools that exist, each with its label (registered by whoever builds a tool
        # registry); anything else a model names is counted as `other`.
        self.known_tools: dict[str, str] = {str(name): str(name) for name in tools}
        r = self.registry = Registry()
        self.turns = r.counter("clawgate_turns_total", "Turns run, by outcome.", ["outcome"])
        self.turn_seconds = r.histogram(
            "clawgate_turn_seconds", "Wall time of a turn, provider included."
        )
        self.tool_calls = r.counter(
            "clawgate_tool_calls_total", "Tool calls by tool and outcome.", ["tool", "outcome"]
        )
        self.provider_seconds = r.histogram(
            "clawgate_provider_request_seconds",
            "Latency of one model call (retries included).",
            ["provider"],
        )
        self.provider_errors = r.counter(
            "clawgate_provider_errors_total",
            "Model calls that failed, by error kind.",
            ["provider", "kind"],
        )
        self.tokens = r.counter(
            "clawgate_tokens_total",
            "Tokens reported by the provider: in, out, cache_read, cache_write.",
            ["direction"],
        )
        # Per kind of turn and model (models: the configured ones, anything else `other`).
        self.known_models: set[str] = set()
        self.usage_tokens = r.counter(
            "clawgate_usage_tokens_total",
            "Tokens reported by the provider, by kind of turn, model and direction.",
            ["kind", "model", "direction"],
        )
        self.usage_cost = r.counter(
            "clawgate_usage_cost_dollars_total",
            "Cost in US dollars from the price table, by kind of turn and model.",
            ["kind", "model"],
        )
        self.fallbacks = r.counter(
            "clawgate_model_fallbacks_total",
            "Calls handed to the next model of a fallback chain, by the model that failed and why.",
            ["model", "kind"],
        )
        self.budget_refusals = r.counter(
            "clawgate_budget_refusals_total",
            "Turns not started because their person reached a cap, by kind of turn.",
            ["kind"],
        )
        self.compactions = r.counter(
            "clawgate_compactions_total",
            "Session compactions by reason and result.",
            ["reason", "result"],
        )
        self.flushes = r.counter(
            "clawgate_memory_flushes_total", "Silent memory flush turns, by outcome.", ["outcome"]
        )
        self.heartbeats = r.counter(
            "clawgate_heartbeats_total", "Heartbeat runs by outcome.", ["outcome"]
        )
        self.deliveries = r.counter(
            "clawgate_deliveries_total",
            "Replies handed to a channel, by outcome.",
            ["channel", "outcome"],
        )
        self.delivery_mark_seconds = r.histogram(
            "clawgate_delivery_mark_seconds",
            "From a platform's answer accepting a send to the outbox recording it: the window "
            "in which a crash makes the restart send it again.",
            buckets=MARK_BUCKETS,
        )
        self.delivery_retries = r.counter(
            "clawgate_delivery_retries_total", "Sends that failed and will be retried.", ["channel"]
        )
        self.messages_given_up = r.counter(
            "clawgate_messages_given_up_total",
            "Messages given up after their turn was cut short by restarts too many times.",
            ["channel"],
        )
        self.search_seconds = r.histogram(
            "clawgate_memory_search_seconds", "Latency of one recall search."
        )
        self.commits = r.counter(
            "clawgate_workspace_commits_total",
            "Workspace versioning commits, by reason.",
            ["reason"],
        )
        self.quota_refusals = r.counter(
            "clawgate_quota_refusals_total",
            "Tool calls and writes refused by a quota: workspace, group_area, turn_write, "
            "step_calls, turn_calls.",
            ["quota"],
        )
        for kind in QUOTA_KINDS:  # every series from the start, so a rate() sees the first
            self.quota_refusals.inc(0, quota=kind)
        self.shared_write_refusals = r.counter(
            "clawgate_shared_writes_refused_total",
            "Writes of a file groups read (a group's area, a persona file) refused in a "
            "private context: unattended (no owner present) or outside_text (a web page, a "
            "document, a tool server's output in the context).",
            ["reason"],
        )
        for reason in SHARED_WRITE_REASONS:
            self.shared_write_refusals.inc(0, reason=reason)
        self.tool_bytes = r.counter(
            "clawgate_tool_bytes_written_total", "Bytes the file tools put into files."
        )
        self.queue_depth = r.gauge(
            "clawgate_queue_depth", "Turns and commands waiting or running, all sessions."
        )
        self.channel_ready = r.gauge(
            "clawgate_channel_ready", "1 if the channel is ready, else 0.", ["channel"]
        )
        self.started = r.gauge("clawgate_start_time_seconds", "Unix time the process started.")
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

    def register_models(self, names: Iterable[str]) -> None:
        """The configured model names: the `model` label's values (others count as other)."""
        self.known_models.update(str(name) for name in names)

    def usage(self, kind: str, model: str, usage: Usage, cost: float) -> None:
        kind = fixed_label(kind, TURN_KINDS)
        model = fixed_label(model, self.known_models)
        for direction, amount in (
            ("in", usage.input_tokens),
            ("out", usage.output_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
        ):
            self.usage_tokens.inc(amount, kind=kind, model=model, direction=direction)
        self.usage_cost.inc(cost, kind=kind, model=model)

    def fallback(self, model: str, error_kind: str) -> None:
        self.fallbacks.inc(model=fixed_label(model, self.known_models), kind=error_kind)

    def quota_refused(self, kind: str) -> None:
        """A quota refused a tool call or a write (gateway/agent/tools/quota.py)."""
        self.quota_refusals.inc(quota=fixed_label(kind, QUOTA_KINDS))

    def shared_write_refused(self, reason: str) -> None:
        """A write of a group-readable file was refused (gateway/agent/tools/files.py)."""
        self.shared_write_refusals.inc(reason=fixed_label(reason, SHARED_WRITE_REASONS))

    def tool_bytes_written(self, count: int) -> None:
        self.tool_bytes.inc(count)

    def register_tools(self, names: Iterable[str] | Mapping[str, str]) -> None:
        """Add registered tools to the label set (whoever builds a tool registry): names,
        each its own label, or name -> label (an MCP tool's label is its configured server,
        so names a server chose never become series)."""
        if isinstance(names, Mapping):
            self.known_tools.update((str(k), str(v)) for k, v in names.items())
        else:
            self.known_tools.update((str(name), str(name)) for name in names)

    def tool_result(self, message: Message) -> None:
        if message.role == "tool":
            outcome = "error" if message.is_error else "ok"
            name = message.tool_name or ""
            tool = fixed_label(self.known_tools.get(name, name), self.known_tools.values())
            self.tool_calls.inc(tool=tool, outcome=outcome)


class UsageSink(Protocol):
    """Where the metered provider reports each call (gateway/pipeline/budgets.py)."""

    def admit(self, scope: UsageScope) -> AbstractAsyncContextManager[object]:
        """Entered around each call and its `after_call`: raises (BudgetExceeded) to stop
        the call before it is made, and may hold it until calls it must not overlap are
        counted."""
        ...

    async def after_call(self, scope: UsageScope, model: str, usage: Usage) -> None: ...


class MeteredProvider:
    """Wraps a provider to time each call and count tokens and errors, and hands each call's
    usage, attributed to its scope (person, kind of turn, group), to the usage sink.

    The one place every model call passes (the agent loop, compaction, tidying, heartbeats
    and reminders all hold this wrapper, never the router under it): the budget guard sits
    here so that no caller, present or future, can make a call it did not admit.
    """

    def __init__(
        self, inner: Provider, metrics: GatewayMetrics, usage: UsageSink | None = None
    ) -> None:
        self.inner = inner
        self.metrics = metrics
        self.usage = usage

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    async def complete(
        self,
        system: SystemPrompt,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        stream: TextStream | None = None,
    ) -> Completion:
        scope = current_scope()
        async with self.usage.admit(scope) if self.usage is not None else nullcontext():
            started = time.perf_counter()
            try:
                completion = await self.inner.complete(system, messages, tools, stream=stream)
            except ProviderError as exc:
                self.metrics.provider_errors.inc(provider=self.name, kind=exc.kind)
                raise
            finally:
                self.metrics.provider_seconds.observe(
                    time.perf_counter() - started, provider=self.name
                )
            usage = completion.usage
            self.metrics.tokens.inc(usage.input_tokens, direction="in")
            self.metrics.tokens.inc(usage.output_tokens, direction="out")
            self.metrics.tokens.inc(usage.cache_read_tokens, direction="cache_read")
            self.metrics.tokens.inc(usage.cache_write_tokens, direction="cache_write")
            if self.usage is not None:
                await self.usage.after_call(scope, completion.model or self.model, usage)
        return completion

    async def close(self) -> None:
        await self.inner.close()

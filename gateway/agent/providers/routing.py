"""Model routing: which model answers a call, and which one answers when it cannot.

- `FallbackChain` tries its models in order. The next one is asked only when the one before
  failed in a way another model may not: overloaded (529), a server error (5xx), a timeout or
  an unreachable server. A refused key, a bad request, a rate limit (waiting helps, and the
  retry policy waits) or a context overflow (compaction helps) end the call as they are.
- `ModelRouter` picks the chain for the running call from its usage scope
  (gateway/agent/scope.py): the background model's for heartbeats, flushes, compaction and
  tidying, the person's own model if they have one, else the main one.

The stack, outermost first: MeteredProvider (counts) -> ModelRouter -> RetryingProvider (one
policy, backoff between rounds) -> FallbackChain -> the SDK providers. So a failing primary
hands over to its fallback at once, within the same attempt, and only when every model of
the chain failed does the retry policy wait and start the chain again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from gateway.agent.conversation import Completion, Message, SystemPrompt, ToolSpec
from gateway.agent.providers.base import ModelInfo, Provider, ProviderError, TextStream
from gateway.agent.scope import BACKGROUND_KINDS, UsageScope, current_scope

log = logging.getLogger(__name__)

FAILOVER_KINDS = frozenset({"overloaded", "server", "timeout", "connection"})

FallbackHook = Callable[[Provider, ProviderError], None]


class FallbackChain:
    """Models tried in order on overload, 5xx, timeouts and unreachable servers."""

    def __init__(
        self, members: Sequence[Provider], *, on_fallback: FallbackHook | None = None
    ) -> None:
        if not members:
            raise ValueError("a fallback chain needs at least one model")
        self.members = list(members)
        self.inner = self.members[0]  # what `warm_up` builds: the first model's SDK
        self.name = self.inner.name
        self.model = self.inner.model
        self._on_fallback = on_fallback

    async def complete(
        self,
        system: SystemPrompt,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        stream: TextStream | None = None,
    ) -> Completion:
        first: ProviderError | None = None
        for index, member in enumerate(self.members):
            if index > 0 and stream is not None:
                # The model before may have written part of an answer: that preview is void.
                stream.restart()
            try:
                completion = await member.complete(system, messages, tools, stream=stream)
            except ProviderError as error:
                if first is not None and error.kind not in FAILOVER_KINDS:
                    # The fallback itself is misconfigured (its key, its model name): say so
                    # in the log, and answer with the reason the primary was left.
                    log.warning(
                        "fallback model %s failed: %s (%s)", member.model, error.kind, error
                    )
                    raise first from None
                if error.kind not in FAILOVER_KINDS:
                    raise
                first = first or error
                if index + 1 == len(self.members):
                    raise
                log.warning(
                    "model %s failed (%s); trying %s",
                    member.model,
                    error.kind,
                    self.members[index + 1].model,
                )
                if self._on_fallback is not None:
                    self._on_fallback(member, error)
                continue
            return completion if completion.model else replace(completion, model=member.model)
        raise AssertionError("unreachable: the last member returns or raises")

    async def close(self) -> None:
        for member in self.members:
            await member.close()


class ModelRouter:
    """The provider the gateway calls: one chain per route, chosen per call by its scope."""

    def __init__(
        self,
        default: Provider,
        *,
        background: Provider | None = None,
        people: Mapping[str, Provider] | None = None,
        models: Sequence[Provider] = (),
    ) -> None:
        """`models`: every distinct SDK provider the chains share, each closed once at the
        end (default: the chains themselves)."""
        self.default = default
        self._models = list(models)
        self.background = background
        self.people = dict(people or {})
        self.inner = default  # `warm_up` builds the main model's SDK after start-up
        self.name = default.name
        self.model = default.model

    def for_scope(self, scope: UsageScope) -> Provider:
        if self.background is not None and scope.kind in BACKGROUND_KINDS:
            return self.background
        return self.people.get(scope.person, self.default)

    def for_person(self, person: str) -> ModelInfo:
        """The chain a conversation of `person` starts with (for the prompt and /status)."""
        return self.for_scope(UsageScope(person, "conversation"))

    def chains(self) -> list[Provider]:
        """Every distinct chain (each is closed once)."""
        found: list[Provider] = []
        for chain in (self.default, self.background, *self.people.values()):
            if chain is not None and all(chain is not seen for seen in found):
                found.append(chain)
        return found

    async def complete(
        self,
        system: SystemPrompt,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        stream: TextStream | None = None,
    ) -> Completion:
        chain = self.for_scope(current_scope())
        completion = await chain.complete(system, messages, tools, stream=stream)
        return completion if completion.model else replace(completion, model=chain.model)

    async def close(self) -> None:
        for provider in self._models or self.chains():
            try:
                await provider.close()
            except Exception:
                log.exception("closing the provider of %s failed; carrying on", provider.model)

"""What a model call cost, from a price table per model.

Prices move and new models appear, so the table below is a starting point (USD per million
tokens, the providers' list prices as published in November 2026) and `[prices.<model>]` in
clawgate.toml overrides or extends it. A model found nowhere costs nothing here and is named
once in the log and by `clawgate doctor`: money caps cannot count it, token caps still do.

Lookup: the exact name, then the name without a date suffix (`claude-sonnet-4-5-20250929`,
`gpt-4o-mini-2024-07-18`), then the longest table name that the model name starts with,
followed by `-` (`claude-haiku-4-5-latest`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.agent.conversation import Usage
from gateway.config.usage import ModelPrice

log = logging.getLogger(__name__)

MILLION = 1_000_000
_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens of each kind."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        ) / MILLION


def _p(input: float, output: float, cache_read: float, cache_write: float | None = None) -> Price:
    # OpenAI bills no cache writes (its caching is automatic); Anthropic's 5-minute cache
    # writes cost 1.25 times an input token.
    return Price(input, output, cache_read, input * 1.25 if cache_write is None else cache_write)


DEFAULT_PRICES: dict[str, Price] = {
    # Anthropic (input, output, cache read, 5-minute cache write)
    "claude-fable-5-1": _p(10.0, 50.0, 0.25),
    "claude-mythos-5-1": _p(10.0, 50.0, 0.25),
    "claude-fable-5": _p(10.0, 50.0, 1.0),
    "claude-mythos-5": _p(10.0, 50.0, 1.0),
    "claude-opus-5-5": _p(4.0, 20.0, 0.20),
    "claude-opus-5": _p(5.0, 25.0, 0.50),
    "claude-opus-4-8": _p(5.0, 25.0, 0.50),
    "claude-opus-4-7": _p(5.0, 25.0, 0.50),
    "claude-opus-4-6": _p(5.0, 25.0, 0.50),
    "claude-opus-4-5": _p(5.0, 25.0, 0.50),
    "claude-opus-4-1": _p(15.0, 75.0, 1.50),
    "claude-opus-4": _p(15.0, 75.0, 1.50),
    "claude-sonnet-5-5": _p(2.0, 10.0, 0.10),
    "claude-sonnet-5": _p(2.0, 10.0, 0.20),
    "claude-sonnet-4-6": _p(3.0, 15.0, 0.30),
    "claude-sonnet-4-5": _p(3.0, 15.0, 0.30),
    "claude-sonnet-4": _p(3.0, 15.0, 0.30),
    "claude-3-7-sonnet": _p(3.0, 15.0, 0.30),
    # Haiku 5.5: prompts up to 100k tokens (longer ones cost five times as much).
    "claude-haiku-5-5": _p(0.10, 0.50, 0.01),
    "claude-haiku-4-5": _p(1.0, 5.0, 0.10),
    "claude-3-5-haiku": _p(0.80, 4.0, 0.08),
    "claude-3-haiku": _p(0.25, 1.25, 0.03, 0.30),
    # OpenAI (input, output, cached input)
    "gpt-5.5": _p(5.0, 30.0, 0.50, 0.0),
    "gpt-5.4": _p(2.50, 15.0, 0.25, 0.0),
    "gpt-5.4-mini": _p(0.75, 4.50, 0.075, 0.0),
    "gpt-5.4-nano": _p(0.20, 1.25, 0.02, 0.0),
    "gpt-5": _p(1.25, 10.0, 0.125, 0.0),
    "gpt-5-mini": _p(0.25, 2.0, 0.025, 0.0),
    "gpt-5-nano": _p(0.05, 0.40, 0.005, 0.0),
    "gpt-4.1": _p(2.0, 8.0, 0.50, 0.0),
    "gpt-4.1-mini": _p(0.40, 1.60, 0.10, 0.0),
    "gpt-4.1-nano": _p(0.10, 0.40, 0.025, 0.0),
    "gpt-4o": _p(2.50, 10.0, 1.25, 0.0),
    "gpt-4o-mini": _p(0.15, 0.60, 0.075, 0.0),
    "o3": _p(2.0, 8.0, 0.50, 0.0),
    "o4-mini": _p(1.10, 4.40, 0.275, 0.0),
    # OpenAI speech (voice replies, gateway/pipeline/voice_reply.py): a reply's characters are
    # its "input tokens", so these are USD per million characters. gpt-4o-mini-tts is billed
    # by text and audio tokens; about $0.015 a minute of speech, near tts-1's price per
    # character, which stands in for it here.
    "tts-1": _p(15.0, 0.0, 0.0, 0.0),
    "tts-1-hd": _p(30.0, 0.0, 0.0, 0.0),
    "gpt-4o-mini-tts": _p(15.0, 0.0, 0.0, 0.0),
}


def from_setting(price: ModelPrice) -> Price:
    return Price(
        price.input,
        price.output,
        price.input * 0.1 if price.cache_read is None else price.cache_read,
        price.input * 1.25 if price.cache_write is None else price.cache_write,
    )


class PriceTable:
    """The default table with the configured `[prices.<model>]` entries on top."""

    def __init__(self, overrides: Mapping[str, ModelPrice] | None = None) -> None:
        self._prices = dict(DEFAULT_PRICES)
        self._prices.update({name: from_setting(p) for name, p in (overrides or {}).items()})
        self._unknown: set[str] = set()

    def price(self, model: str) -> Price | None:
        if model in self._prices:
            return self._prices[model]
        base = _DATE_SUFFIX.sub("", model)
        if base in self._prices:
            return self._prices[base]
        prefixes = [name for name in self._prices if base.startswith(name + "-")]
        return self._prices[max(prefixes, key=len)] if prefixes else None

    def known(self, model: str) -> bool:
        return self.price(model) is not None

    def cost(self, model: str, usage: Usage) -> float:
        """USD; 0 for a model with no price (logged once per model)."""
        price = self.price(model)
        if price is None:
            if model not in self._unknown:
                self._unknown.add(model)
                # Not a warning: a local or fake model often has no price, and a chat shows
                # warnings; doctor fails on it when a money cap would be blind to the cost.
                log.info(
                    'no price for model %s: its cost counts as 0 (add [prices."%s"] '
                    "to clawgate.toml)",
                    model,
                    model,
                )
            return 0.0
        return price.cost(usage)

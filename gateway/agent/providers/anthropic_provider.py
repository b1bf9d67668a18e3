"""Anthropic Messages API provider (tool use, prompt caching; streamed when asked)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import anthropic
from anthropic.types import Message as AnthropicMessage

from gateway.agent.conversation import (
    Completion,
    ImagePart,
    Message,
    SystemPrompt,
    ToolCall,
    ToolSpec,
    Usage,
    image_placeholder,
)
from gateway.agent.providers.base import TextStream
from gateway.agent.providers.caching import anthropic_layout
from gateway.agent.providers.errors import bad_response, call_mapped
from gateway.agent.providers.streaming import transport_errors_mapped

# The API rejects empty text blocks, and it rejects conversations that do not start with a
# user turn (which happens when history is trimmed from the front).
EMPTY_TEXT = "(empty message)"
LEADING_PLACEHOLDER = "(conversation continues)"


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text or EMPTY_TEXT}


def system_blocks(system: SystemPrompt) -> list[dict[str, Any]]:
    """Stable part first and marked cacheable, so a volatile change does not bust the cache."""
    blocks: list[dict[str, Any]] = []
    if system.stable:
        blocks.append(
            {"type": "text", "text": system.stable, "cache_control": {"type": "ephemeral"}}
        )
    if system.volatile:
        blocks.append({"type": "text", "text": system.volatile})
    return blocks


def _blocks_for(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.text or EMPTY_TEXT,
        }
        if message.is_error:
            result["is_error"] = True
        return "user", [result]
    if message.role == "assistant":
        blocks = [_text_block(message.text)] if message.text else []
        blocks += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        ]
        return "assistant", blocks or [_text_block("")]
    if message.images:  # images first, then the text about them (as Anthropic advises)
        return "user", [
            *(_image_block(image) for image in message.images),
            _text_block(message.text),
        ]
    return "user", [_text_block(message.text)]


def _image_block(image: ImagePart) -> dict[str, Any]:
    if not image.data:
        return _text_block(image_placeholder(image))
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": image.media_type,
            "data": base64.b64encode(image.data).decode("ascii"),
        },
    }


def to_anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages → strictly alternating Anthropic turns.

    Tool results become user turns, so consecutive results (and a user message typed while
    tools ran) merge into one user turn; within it tool_result blocks go first, as the API
    requires them to directly answer the preceding tool_use blocks.
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _blocks_for(message)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [_text_block(LEADING_PLACEHOLDER)]})
    return turns


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def parse_message(response: object, provider: str = "anthropic") -> Completion:
    """Check the shape ourselves: the SDK hands back a str for non-JSON content types and
    builds a Message full of None from a JSON body of the wrong shape."""
    if not isinstance(response, AnthropicMessage) or not isinstance(response.content, list):
        raise bad_response(provider, "not a Messages API message")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in response.content:
        block_type = getattr(block, "type", None)
        if block_type == "text":
            texts.append(str(getattr(block, "text", "") or ""))
        elif block_type == "tool_use":
            raw = getattr(block, "input", None)
            ok = isinstance(raw, dict)
            arguments: dict[str, Any] = raw if isinstance(raw, dict) else {}
            calls.append(
                ToolCall(
                    id=str(getattr(block, "id", "") or ""),
                    name=str(getattr(block, "name", "") or ""),
                    arguments=arguments,
                    arguments_error="" if ok else "tool input was not a JSON object",
                )
            )
    usage = response.usage
    return Completion(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage(
            input_tokens=getattr(usage, "input_tokens", 0) or 0,
            output_tokens=getattr(usage, "output_tokens", 0) or 0,
            cache_read_tokens=getattr(usage, "cache_read_input_tokens", 0) or 0,
            cache_write_tokens=getattr(usage, "cache_creation_input_tokens", 0) or 0,
        ),
        stop_reason=str(response.stop_reason or ""),
    )


class AnthropicProvider:
    """Claude through the official SDK with SDK retries off: `RetryingProvider` owns retries,
    so one policy (and one place that honours retry-after) covers every provider."""

    name = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        max_output_tokens: int = 4096,
        timeout_seconds: float = 120.0,
        secrets: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.max_output_tokens = max_output_tokens
        # Every configured secret, not only our key: an error body may echo any of them.
        self._secrets = (api_key, *secrets)
        # An explicit timeout also stops the SDK from refusing large non-streaming max_tokens
        # (it only computes its own "needs streaming" limit when the timeout is the default).
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=0
        )

    async def complete(
        self,
        system: SystemPrompt,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        stream: TextStream | None = None,
    ) -> Completion:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_output_tokens,
            "messages": to_anthropic_messages(messages),
        }
        if blocks := system_blocks(system):
            params["system"] = blocks
        if tools:
            params["tools"] = to_anthropic_tools(tools)
        params = anthropic_layout(params, system.now)  # cache breakpoints, time note last
        call = (
            self._client.messages.create(**params)
            if stream is None
            else self._streamed(params, stream)
        )
        response = await call_mapped(call, provider=self.name, secrets=self._secrets)
        return parse_message(response, self.name)

    async def _streamed(self, params: dict[str, Any], stream: TextStream) -> object:
        """The same request over server-sent events (`messages.stream`): text deltas go to
        `stream` as they arrive; the SDK assembles the final message (usage included: input
        and cache counts from `message_start`, output from the last `message_delta`)."""
        with transport_errors_mapped(self.name):
            async with self._client.messages.stream(**params) as events:
                async for event in events:
                    if event.type == "text" and event.text:
                        stream.delta(event.text)
                return await events.get_final_message()

    async def close(self) -> None:
        await self._client.close()

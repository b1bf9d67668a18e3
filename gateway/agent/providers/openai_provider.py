"""OpenAI Chat Completions provider, also used for OpenAI-compatible servers (Ollama, vLLM).

Compatible servers differ in small ways (no usage block, null content, arguments that are not
JSON, missing tool-call ids), so parsing is deliberately forgiving: a sloppy reply should
degrade into something the agent loop can answer, not into an exception.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from gateway.agent.conversation import (
    Completion,
    Message,
    SystemPrompt,
    ToolCall,
    ToolSpec,
    Usage,
    image_placeholder,
)
from gateway.agent.providers.base import TextStream
from gateway.agent.providers.caching import openai_layout
from gateway.agent.providers.errors import bad_response, call_mapped, classify_status
from gateway.agent.providers.streaming import transport_errors_mapped


def _tool_result_text(message: Message) -> str:
    # Chat Completions has no error flag on tool results, so say it in the text.
    if message.is_error and not message.text.lower().startswith("error"):
        return f"Error: {message.text}"
    return message.text


def to_openai_messages(system: SystemPrompt, messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if prompt := system.joined():
        out.append({"role": "system", "content": prompt})
    for m in messages:
        if m.role == "tool":
            out.append(
                {"role": "tool", "tool_call_id": m.tool_call_id, "content": _tool_result_text(m)}
            )
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.text or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        elif m.images:
            out.append({"role": m.role, "content": _user_parts(m)})
        else:
            out.append({"role": m.role, "content": m.text})
    return out


def _user_parts(message: Message) -> list[dict[str, Any]]:
    """Text first, then image parts (a data URL each); an image without data is a line."""
    notes = [image_placeholder(i) for i in message.images if not i.data]
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": "\n".join([message.text, *notes]).strip() or "(image)"}
    ]
    for image in message.images:
        if image.data:
            url = f"data:{image.media_type};base64,{base64.b64encode(image.data).decode('ascii')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def parse_arguments(raw: object) -> tuple[dict[str, Any], str]:
    """(arguments, error). Empty means "no arguments"; some servers already send an object."""
    if isinstance(raw, dict):
        return raw, ""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, ""
    if not isinstance(raw, str):
        return {}, f"arguments were a {type(raw).__name__}, not a JSON object"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, ""


def _parse_tool_call(call: Any) -> ToolCall | None:
    function = getattr(call, "function", None)
    if function is None:  # custom (non-function) tool calls: we never declare any
        return None
    arguments, error = parse_arguments(getattr(function, "arguments", None))
    return ToolCall(
        id=str(getattr(call, "id", "") or f"call_{uuid.uuid4().hex[:24]}"),
        name=str(getattr(function, "name", "") or ""),
        arguments=arguments,
        arguments_error=error,
    )


def _parse_usage(usage: Any) -> Usage:
    """OpenAI counts cached tokens inside prompt_tokens; Anthropic's input_tokens excludes them.
    Subtracting makes `input_tokens` mean "uncached input" for both providers."""
    if usage is None:
        return Usage()
    prompt = getattr(usage, "prompt_tokens", 0) or 0
    details = getattr(usage, "prompt_tokens_details", None)
    cached = min(getattr(details, "cached_tokens", 0) or 0, prompt)
    return Usage(
        input_tokens=prompt - cached,
        output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cache_read_tokens=cached,
    )


def parse_completion(response: object, provider: str = "openai") -> Completion:
    if not isinstance(response, ChatCompletion) or not response.choices:
        raise bad_response(provider, "not a chat completion with choices")
    choice = response.choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise bad_response(provider, "choice without a message")
    calls = [_parse_tool_call(c) for c in (getattr(message, "tool_calls", None) or [])]
    return Completion(
        text=str(getattr(message, "content", None) or ""),
        tool_calls=tuple(c for c in calls if c is not None),
        usage=_parse_usage(getattr(response, "usage", None)),
        stop_reason=str(getattr(choice, "finish_reason", None) or ""),
    )


class StreamedAnswer:
    """A streamed chat completion put together from its chunks, as forgivingly as
    `parse_completion` reads a whole one: tool calls arrive in fragments keyed by `index`
    (the id and name in the first, the arguments spread over the rest); the usage comes in a
    last chunk without choices (`stream_options.include_usage`)."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.texts: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.usage: Any = None
        self.finish_reason = ""
        self.chunks = 0

    def add(self, chunk: Any, stream: TextStream) -> None:
        self.chunks += 1
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) not in (0, None):
                continue
            self.finish_reason = str(getattr(choice, "finish_reason", None) or self.finish_reason)
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            if text := getattr(delta, "content", None):
                self.texts.append(str(text))
                stream.delta(str(text))
            for fragment in getattr(delta, "tool_calls", None) or []:
                call = self.calls.setdefault(
                    int(getattr(fragment, "index", 0) or 0), {"id": "", "name": "", "arguments": ""}
                )
                call["id"] = call["id"] or str(getattr(fragment, "id", None) or "")
                function = getattr(fragment, "function", None)
                if function is not None:
                    call["name"] += str(getattr(function, "name", None) or "")
                    call["arguments"] += str(getattr(function, "arguments", None) or "")

    def completion(self) -> Completion:
        if self.chunks == 0:
            raise bad_response(self.provider, "the stream ended without a chunk")
        calls = []
        for _, call in sorted(self.calls.items()):
            arguments, error = parse_arguments(call["arguments"])
            calls.append(
                ToolCall(
                    id=call["id"] or f"call_{uuid.uuid4().hex[:24]}",
                    name=call["name"],
                    arguments=arguments,
                    arguments_error=error,
                )
            )
        return Completion(
            text="".join(self.texts),
            tool_calls=tuple(calls),
            usage=_parse_usage(self.usage),
            stop_reason=self.finish_reason,
        )


def _asks_for_max_completion_tokens(exc: Exception) -> bool:
    """OpenAI's reasoning models reject `max_tokens` with a 400 naming the replacement."""
    if not isinstance(exc, openai.BadRequestError):
        return False
    text = f"{exc.message} {exc.param or ''} {exc.code or ''}"
    return "max_tokens" in text and "max_completion_tokens" in text


class OpenAIProvider:
    """Chat Completions through the official SDK, SDK retries off (`RetryingProvider` owns them).

    The output limit goes out as `max_tokens`: the installed SDK accepts it without a warning,
    and it is the field every OpenAI-compatible server understands (several ignore or reject
    `max_completion_tokens`). OpenAI's reasoning models refuse it with a 400 that names
    `max_completion_tokens`; then this provider switches field, remembers it, and resends once.
    """

    name = "openai"

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
        self._limit_field = "max_tokens"
        if not api_key and base_url:
            # Local servers ignore the key, but this SDK refuses to construct without one.
            api_key = "unused"
        self._client = openai.AsyncOpenAI(
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
            # The time note goes last, so the prefix stays byte-identical (caching.py).
            "messages": openai_layout(to_openai_messages(system, messages), system.now),
        }
        if tools:  # some compatible servers reject an empty list
            params["tools"] = to_openai_tools(tools)
        if stream is not None:
            return await call_mapped(
                self._streamed(params, stream), provider=self.name, secrets=self._secrets
            )
        response = await call_mapped(
            self._create_with_fallback(params), provider=self.name, secrets=self._secrets
        )
        return parse_completion(response, self.name)

    async def _streamed(self, params: dict[str, Any], stream: TextStream) -> Completion:
        """`stream=True` with the usage in a last chunk; text deltas go to `stream`."""
        params = {**params, "stream": True, "stream_options": {"include_usage": True}}
        answer = StreamedAnswer(self.name)
        with transport_errors_mapped(self.name):
            chunks: Any = await self._create_with_fallback(params)
            try:
                async for chunk in chunks:
                    answer.add(chunk, stream)
            except openai.APIError as exc:
                if isinstance(exc, openai.APIStatusError):
                    raise
                # An `error` event in the middle of the stream: the HTTP status was 200
                # already, so the body decides (overloaded, else a server error).
                raise classify_status(
                    500, exc.body, None, provider=self.name, secrets=self._secrets
                ) from None
        return answer.completion()

    async def _create_with_fallback(self, params: dict[str, Any]) -> object:
        """Send once; resend with `max_completion_tokens` if the model asks for that field."""
        try:
            return await self._create(params)
        except openai.BadRequestError as exc:
            if self._limit_field != "max_tokens" or not _asks_for_max_completion_tokens(exc):
                raise
            self._limit_field = "max_completion_tokens"
            return await self._create(params)

    async def _create(self, params: dict[str, Any]) -> object:
        limit = {self._limit_field: self.max_output_tokens}
        # The request is built as a plain dict (the SDK's TypedDict overloads cannot see it).
        create: Any = self._client.chat.completions.create
        return await create(**params, **limit)

    async def close(self) -> None:
        await self._client.close()

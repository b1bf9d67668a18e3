"""Provider-neutral conversation records.

Transcripts, the agent loop and both providers speak this one shape, so a session written while
talking to Anthropic can be continued against an OpenAI-compatible server and vice versa.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    # Set when the model sent arguments that were not a JSON object; the loop answers with a
    # tool error instead of running the tool.
    arguments_error: str = ""


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image a person sent, saved in the workspace (`path` is workspace-relative).

    The history keeps only this reference; `data` (the resized image's bytes) is filled in
    just before a model call, for the newest few images (gateway/agent/media/window.py). A
    provider shows an image without data as a one-line placeholder, so old images cost a
    line, not a thousand tokens each, and compaction never sends pixels.
    """

    path: str
    media_type: str
    width: int = 0
    height: int = 0
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    tool_name: str = ""
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()  # user messages only
    # Where outside text in this message came from ("a web_fetch result", "a document the
    # person sent"), "" for the owner's own words and files and the assistant's own text.
    # Recorded in the transcript: gateway/agent/provenance.py reads the context's taint from it.
    untrusted: str = ""


def image_placeholder(image: ImagePart) -> str:
    """What a model reads where an older image was (or an image it cannot see)."""
    return (
        f"[image {image.path} is not shown again here; read_file cannot open it, ask the "
        "person to send it again if you need to look at it]"
    )


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool: its name, purpose and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]
    # Whether the gateway checks a call's arguments against `parameters` before the tool runs
    # (gateway/agent/tools/args.py). False for schemas written by others: an MCP server checks
    # its own arguments, and running its schema here would let a hostile `pattern` stall the
    # event loop.
    checked: bool = True
    # Whether what the tool returns comes from outside the owner's messages and files (a web
    # page, a search, a tool server, a command's output): its results taint the context
    # window they enter (gateway/agent/provenance.py). Declared by each tool; a tool whose
    # output is outside only sometimes (read_file of a group's file) marks that result
    # instead (`gateway.agent.tools.base.OutsideText`).
    untrusted_output: bool = False


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def context_tokens(self) -> int:
        """Everything the request and its answer occupied in the context window.

        Both providers report cached prompt tokens apart from `input_tokens`.
        """
        return (
            self.input_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
            + self.output_tokens
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True, slots=True)
class Completion:
    """One model response, normalized across providers."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = ""
    # The model that answered, as configured (set by the routing layer: with fallbacks it is
    # not always the one asked first); it picks the price.
    model: str = ""


@dataclass(frozen=True, slots=True)
class SystemPrompt:
    """The system prompt in parts, so providers can cache the prefix (providers/caching.py).

    `stable` must be byte-identical between turns unless a workspace file changed; `volatile`
    (run info: the channel, the session, the speaker in a group) comes after it and is the
    same for every turn of a direct chat; `now` (the current time) changes every turn, so it
    is not sent in the system prompt at all but after the history, as a note on the newest
    message.
    """

    stable: str
    volatile: str = ""
    now: str = ""

    def joined(self) -> str:
        return f"{self.stable}\n\n{self.volatile}" if self.volatile else self.stable

"""Request layouts that let the providers' prompt caches pay.

Both APIs cache a prompt by its prefix: Anthropic where a `cache_control` breakpoint says so
(the order is tools, system, messages), OpenAI automatically for the longest byte-identical
prefix it saw recently. Anything that changes from one request to the next ends the reusable
prefix where it sits. So:

- The current time (`SystemPrompt.now`) is not in the system prompt: it goes last, after the
  history, as a note on the newest message (in the request only, never in the transcript).
  The tools, the system prompt and the history before it stay byte-identical from turn to
  turn in a direct chat, and each request's prefix is the previous request's plus what was
  said since. (The run info after the stable system prompt changes only in a group, when
  the speaker does: who is speaking stays in the system prompt, where a member's message
  cannot imitate it.)
- Anthropic: three breakpoints (the API allows four): the last tool (tools rarely change),
  the stable system prompt (changes when a workspace file does), and the newest message (the
  growing history: the next request finds all of it in the cache, looking back from its own
  newest message to this one). The time note comes after the last breakpoint.
- OpenAI-compatible: the note is appended to the newest message's text.
"""

from __future__ import annotations

from typing import Any

BREAKPOINT = {"type": "ephemeral"}


def time_note(now: str) -> str:
    return f"[{now}]" if now else ""


def anthropic_layout(params: dict[str, Any], now: str) -> dict[str, Any]:
    """Breakpoints on the last tool and the newest message (the system prompt's stable block
    carries its own); the time note after them."""
    params = dict(params)
    if params.get("tools"):
        tools = [dict(tool) for tool in params["tools"]]
        tools[-1]["cache_control"] = BREAKPOINT
        params["tools"] = tools
    # Only the newest message changes: copy it alone (a deep copy of the whole history cost
    # about 5 ms a request at 30 tool rounds, on the event loop every chat shares).
    messages = list(params["messages"])
    last = {**messages[-1], "content": list(messages[-1]["content"])}
    messages[-1] = last
    if last["content"]:
        last["content"][-1] = {**last["content"][-1], "cache_control": BREAKPOINT}
    if now:
        note = {"type": "text", "text": time_note(now)}
        if last["role"] == "user":
            last["content"].append(note)
        else:
            messages.append({"role": "user", "content": [note]})
    params["messages"] = messages
    return params


def openai_layout(messages: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """The time note at the end of the newest message (a user message or a tool result);
    everything before it is what the previous request sent, byte for byte."""
    if not now or not messages:
        return messages
    messages = list(messages)
    last = dict(messages[-1])
    note = time_note(now)
    content = last.get("content")
    if isinstance(content, list):
        last["content"] = [*content, {"type": "text", "text": note}]
    elif content:
        last["content"] = f"{content}\n\n{note}"
    else:
        last["content"] = note
    messages[-1] = last
    return messages

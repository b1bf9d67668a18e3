"""Whose model call is this, and what for: the person, the kind of turn, and the group chat.

Set once where a turn of some kind starts (a conversation turn, a heartbeat, a reminder's
agent task, a memory flush, a compaction, tidying) and read by whatever sits between the
agent loop and the SDK: the model router picks the model by it, the usage meter attributes
the tokens and the cost to it, the budget guard checks each call against its caps. A context
variable rather than a parameter, so the agent loop, the compactor and the tools stay unaware
of accounting and the value follows the call into tasks it starts (asyncio copies the context
into a new task).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal, get_args

# `speech`: a reply read aloud by a paid speech API (its characters counted as input tokens).
TurnKind = Literal[
    "conversation",
    "heartbeat",
    "flush",
    "compaction",
    "reminders",
    "tidying",
    "consolidation",
    "speech",
    "tasks",
    "other",
]
TURN_KINDS: tuple[TurnKind, ...] = get_args(TurnKind)
# Turns nobody is waiting for: the cheaper background model answers them when one is set.
BACKGROUND_KINDS: frozenset[TurnKind] = frozenset(
    {"heartbeat", "flush", "compaction", "tidying", "consolidation", "tasks"}
)
NO_PERSON = ""


@dataclass(frozen=True, slots=True)
class UsageScope:
    person: str = NO_PERSON
    kind: TurnKind = "other"
    # The group chat's session key when the call serves a group (billed to `person`, the
    # owner, and counted against the group's own cap too); "" otherwise.
    group: str = ""


UNSCOPED = UsageScope()  # frozen: safe as the shared default
_scope: contextvars.ContextVar[UsageScope] = contextvars.ContextVar(
    "clawgate_usage_scope", default=UNSCOPED
)


def current_scope() -> UsageScope:
    return _scope.get()


@contextlib.contextmanager
def usage_scope(person: str, kind: TurnKind, group: str = "") -> Iterator[UsageScope]:
    """Model calls inside are made for `person`, as a turn of `kind` (in `group`, if set)."""
    scope = UsageScope(person, kind, group)
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


@contextlib.contextmanager
def usage_kind(kind: TurnKind) -> Iterator[UsageScope]:
    """Same person and group, another kind (a flush or compaction inside a turn)."""
    scope = replace(_scope.get(), kind=kind)
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)

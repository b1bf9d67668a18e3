"""The Gateway's parts, built from settings in one place and handed over ready.

`build_parts` is the wiring that used to fill the Gateway's constructor: state database,
router, lanes and sessions, metrics and versioning, model routing and accounting (every model
call of every kind of turn goes through `metered`), media, the agent loop and compactor, the
capabilities, the delivery path and the turn runner. The Gateway (gateway/pipeline/gateway.py)
takes the result and only moves messages; tests and benchmarks get the same wiring through
`Gateway.build`, with fakes in place of the provider, channels and clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from channels.base import Channel, InboundMessage
from gateway.agent.compaction import Compactor
from gateway.agent.loop import AgentLoop
from gateway.agent.metrics import GatewayMetrics, MeteredProvider
from gateway.agent.providers import ModelRouter, build_router, models_in_use
from gateway.agent.providers.base import Provider
from gateway.agent.sessions import SessionStore
from gateway.agent.tools import Tool
from gateway.capabilities.hub import Capabilities
from gateway.clock import Clock, SystemClock
from gateway.config.settings import Settings
from gateway.ops.prices import PriceTable
from gateway.ops.redaction import Redactor
from gateway.ops.state import StateDB
from gateway.ops.usage import UsageLedger
from gateway.ops.versioning import Versioning
from gateway.pipeline.access import AccessPolicy, LocalOnlyAccess
from gateway.pipeline.budgets import Accounting, Budgets
from gateway.pipeline.delivery import Delivery
from gateway.pipeline.lanes import Lanes
from gateway.pipeline.limits import PersonLimits
from gateway.pipeline.recovery import Retries
from gateway.pipeline.replies import endpoint_host
from gateway.pipeline.routing import Route, Router
from gateway.pipeline.turn_setup import TurnSetup
from gateway.pipeline.turns import TurnRunner

if TYPE_CHECKING:
    from pathlib import Path

    from gateway.agent.instructions import InstructionKeeper
    from gateway.agent.media.intake import MediaIntake, UserContent
    from gateway.agent.media.speech import Speaker
    from gateway.agent.media.window import ImageWindow
    from gateway.pipeline.voice_reply import VoiceReplies


@dataclass(slots=True)
class GatewayParts:
    """Everything the Gateway moves messages with; each part has one job (see its module)."""

    settings: Settings
    provider: Provider  # as given (its SDK may still load: gateway/agent/providers/deferred.py)
    clock: Clock
    redactor: Redactor  # shared with the log formatter (gateway/ops/logs.py share_redactor)
    access: AccessPolicy
    channels: dict[str, Channel]
    state: StateDB  # inbox, links, approvals, last DM routes (gateway/ops/state.py)
    router: Router
    sessions: SessionStore
    lanes: Lanes
    limits: PersonLimits
    metrics: GatewayMetrics
    versioning: Versioning
    models: ModelRouter  # fallbacks, background model, per-person models
    usage: UsageLedger
    budgets: Budgets
    accounting: Accounting
    metered: Provider  # `models` timed, counted and accounted: every model call goes here
    media: MediaIntake | None  # voice notes, photos, documents; None when [media] is off
    capabilities: Capabilities  # skills and MCP tool servers
    setup: TurnSetup  # tools, context files, system prompt, tool context of every turn
    compactor: Compactor
    delivery: Delivery  # the one way out: outbox, per-chat ordered senders, retries
    turns: TurnRunner
    voice: VoiceReplies | None  # replies read aloud; None when `[media.speech] backend = none`


async def _no_note(text: str, key: str) -> None:
    """Budgets' notes before the Gateway gives them a way to the owner."""


def build_parts(
    settings: Settings,
    provider: Provider,
    *,
    channels: Sequence[Channel] = (),
    clock: Clock | None = None,
    access: AccessPolicy | None = None,
    private_tools: Sequence[Tool] = (),
    state: StateDB | None = None,
    redactor: Redactor | None = None,
) -> GatewayParts:
    """The parts for `settings`, not started (no I/O happens here)."""
    clock = clock or SystemClock()
    # Masks every configured secret in tool results (gateway/ops/redaction.py); shared with the
    # log formatter so secrets added later (`redactor.add`) are masked there too.
    redactor = redactor or Redactor.from_settings(settings)
    by_name = {channel.name: channel for channel in channels}
    state = state or StateDB.for_root(  # opened by Gateway.start
        settings.workspaces_dir, inbox_retention=settings.inbox_retention)
    lanes, metrics = Lanes(), GatewayMetrics()
    metrics.queue_depth.collect_with(lambda: {(): lanes.depth()})
    versioning = Versioning(enabled=settings.versioning.enabled,
                            on_commit=lambda reason: metrics.commits.inc(reason=reason))
    models = provider if isinstance(provider, ModelRouter) else build_router(
        settings, provider, on_fallback=lambda p, e: metrics.fallback(p.model, e.kind))
    metrics.register_models(ref.model for _, ref in models_in_use(settings))
    usage = UsageLedger(state, PriceTable(settings.prices), clock, settings.zone())
    budgets = Budgets(settings, usage, _no_note)
    accounting = Accounting(usage, budgets, metrics)
    metered = MeteredProvider(models, metrics, accounting)
    capabilities = Capabilities(settings)
    capabilities.register_metrics(metrics.registry)
    delivery = Delivery(by_name, state, metrics)
    setup = TurnSetup(settings, clock, channels=by_name, delivery=delivery, metrics=metrics,
                      models=models, capabilities=capabilities, redactor=redactor,
                      private_tools=private_tools)
    media = _media_intake(settings, provider, clock, setup)
    agent = AgentLoop(metered, settings.llm.max_tool_rounds, images=_image_window(settings, media))
    sessions = SessionStore(clock)
    compactor = Compactor(metered, agent, settings.llm, settings.compaction, clock,
                          settings.zone(), metrics=metrics, versioning=versioning,
                          instructions=_instructions(settings, metered, clock, metrics))
    turns = _turn_runner(settings, provider, sessions, agent, compactor, setup, delivery,
                         metrics, versioning, state, media, by_name)
    router = Router(settings.workspaces_dir, settings.owner, state)
    turns.voice = voice = _voice_replies(settings, state, accounting, router)
    limits = PersonLimits(clock, settings.limits.queue_per_person,
                          settings.limits.messages_per_minute)
    return GatewayParts(
        settings, provider, clock, redactor, access or LocalOnlyAccess(), by_name, state,
        router, sessions, lanes, limits,
        metrics, versioning, models, usage, budgets, accounting, metered, media, capabilities,
        setup, compactor, delivery, turns, voice,
    )


def _voice_replies(settings: Settings, state: StateDB, accounting: Accounting,
                   router: Router) -> VoiceReplies | None:
    """Replies read aloud, or None when no speech backend is configured. Nothing loads here:
    the backend is made with the first reply to be spoken, and the local voice loads on its
    speech thread then."""
    speech = settings.media.speech
    if speech.backend == "none":
        return None
    from gateway.pipeline.voice_reply import VOICE_DIR, VoiceReplies
    from gateway.workspace.seed import workspace_path

    def make_speaker() -> Speaker:  # at the first reply spoken: numpy and PyAV load then
        from gateway.agent.media.speech import build_speaker

        return build_speaker(speech)

    async def person_workspace(channel: str, sender_id: str) -> Path | None:
        """A group speaker's own workspace (where their /voice choice is), if they have one."""
        workspace = workspace_path(settings.workspaces_dir,
                                   await router.person_for(channel, sender_id))
        return workspace if workspace.is_dir() else None

    return VoiceReplies(speech, make_speaker, state.path.parent / VOICE_DIR,
                        accounting=accounting, billed=speech.backend == "openai",
                        person_workspace=person_workspace)


def _turn_runner(settings: Settings, provider: Provider, sessions: SessionStore,
                 agent: AgentLoop, compactor: Compactor, setup: TurnSetup, delivery: Delivery,
                 metrics: GatewayMetrics, versioning: Versioning, state: StateDB,
                 media: MediaIntake | None, channels: dict[str, Channel]) -> TurnRunner:
    """The turn runner, with the media step and claim capture when they are on."""
    turns = TurnRunner(
        sessions, agent, compactor, setup, delivery, metrics, versioning,
        Retries(state, delivery, metrics),
        deadline_seconds=settings.limits.turn_deadline_seconds,
        model=provider.model,
        host=endpoint_host(settings.llm.provider, settings.llm.base_url),
    )
    if media is not None:
        intake = media

        async def take(route: Route, msg: InboundMessage) -> UserContent:
            """The turn's user message from `msg`'s attachments, fetched through its channel."""
            return await intake.take(msg, channels[route.channel], route.workspace,
                                     route.access)

        turns.media = take
    if settings.memory.capture_claims:
        from gateway.pipeline.capture import Capture

        turns.capture = Capture(agent, metrics.registry)
    turns.instructions = compactor.instructions
    return turns


def _instructions(settings: Settings, metered: Provider, clock: Clock,
                  metrics: GatewayMetrics) -> InstructionKeeper | None:
    """Standing instructions (gateway/agent/instructions.py), unless turned off."""
    if not settings.memory.standing_instructions:
        return None
    from gateway.agent.instructions import InstructionKeeper

    return InstructionKeeper(metered, clock, settings.zone(), metrics.registry)


def _media_intake(settings: Settings, provider: Provider, clock: Clock,
                  setup: TurnSetup) -> MediaIntake | None:
    if not settings.media.enabled:
        return None
    from gateway.agent.media.audio import build_transcriber
    from gateway.agent.media.intake import MediaIntake

    zone = settings.zone()
    return MediaIntake(
        settings.media, build_transcriber(settings.media.transcription),
        provider=settings.llm.provider, model=provider.model,
        now=lambda: clock.now().astimezone(zone),
        max_text_bytes=settings.tools.max_file_bytes,
        deadline_seconds=settings.limits.turn_deadline_seconds,
        budget=setup.turn_budget,
    )


def _image_window(settings: Settings, media: MediaIntake | None) -> ImageWindow | None:
    """Images kept in the context (vision models only), else None."""
    if media is None or not media.vision:
        return None
    from gateway.agent.media.window import ImageWindow

    return ImageWindow(settings.media.images_in_context)

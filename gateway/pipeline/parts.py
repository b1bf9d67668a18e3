"""The Gateway's parts, built from settings in one place and handed over ready.

`build_parts` builds them in dependency order, each given what it needs in its constructor
(nothing is attached afterwards): state database, router, lanes and sessions, metrics and
versioning, model routing and accounting (every model call of every kind of turn goes through
`metered`), the delivery path and the DM routes, budgets (their notes go to the owner's DM),
media, the agent loop and compactor, the capabilities, the turn setup (with the memory, web and
schedule tools the assembly made), recall and claim capture, and the turn runner. The Gateway
(gateway/pipeline/gateway.py) takes the result and only moves messages; the parts around it
(gateway/assembly/, the panel, health, the CLI) are given these parts through the protocols
of gateway/pipeline/ports.py. Tests and benchmarks get the same wiring through
`Gateway.build`, with fakes in place of the provider, channels and clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
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
from gateway.ops.redaction import Redactor
from gateway.ops.versioning import Versioning
from gateway.pipeline.access import AccessPolicy, LocalOnlyAccess
from gateway.pipeline.budgets import Accounting, Budgets
from gateway.pipeline.commands import CommandContexts
from gateway.pipeline.delivery import Delivery
from gateway.pipeline.dm_routes import DmRoutes
from gateway.pipeline.lanes import Lanes
from gateway.pipeline.limits import PersonLimits
from gateway.pipeline.presses import Presses, PressPorts, PressWiring
from gateway.pipeline.recovery import Retries
from gateway.pipeline.replies import endpoint_host
from gateway.pipeline.routing import Route, Router
from gateway.pipeline.turn_setup import TurnSetup
from gateway.pipeline.turns import TurnRunner
from gateway.pipeline.voice_choice import VoiceChoices
from gateway.stores.prices import PriceTable
from gateway.stores.state import StateDB
from gateway.stores.usage import UsageLedger

if TYPE_CHECKING:
    from pathlib import Path

    from gateway.agent.instructions import InstructionKeeper
    from gateway.agent.media.intake import MediaIntake, UserContent
    from gateway.agent.media.speech import Speaker
    from gateway.agent.media.window import ImageWindow
    from gateway.agent.tools.schedule_tools import ScheduleDesk
    from gateway.pipeline.auto_recall import AutoRecall
    from gateway.pipeline.capture import Capture
    from gateway.pipeline.ports import TaskDeskPort
    from gateway.pipeline.voice_reply import VoiceReplies
    from memory.service import MemoryService


@dataclass(slots=True)
class GatewayParts:
    """Everything the Gateway moves messages with; each part has one job (see its module)."""

    settings: Settings
    provider: Provider  # as given (its SDK may still load: gateway/agent/providers/deferred.py)
    clock: Clock
    redactor: Redactor  # shared with the log formatter (gateway/ops/logs.py share_redactor)
    access: AccessPolicy
    channels: dict[str, Channel]
    state: StateDB  # inbox, links, approvals, last DM routes (gateway/stores/state.py)
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
    routes: DmRoutes  # each person's last DM route: heartbeats, reminders, budget notes
    turns: TurnRunner
    voice: VoiceReplies | None  # replies read aloud; None when `[media.speech] backend = none`
    commands: CommandContexts  # what a slash command (and the panel's session action) uses
    memory: MemoryService | None  # recall and the memory tools; None without an index
    schedule_desk: ScheduleDesk | None  # reminders: the tools, /reminders, the panel's page
    presses: Presses | None = None  # button presses and /approve, /deny: the exec approvals
    task_desk: TaskDeskPort | None = None  # background tasks (gateway/features/tasks/); None: off


def build_parts(
    settings: Settings,
    provider: Provider,
    *,
    channels: Sequence[Channel] = (),
    clock: Clock | None = None,
    access: AccessPolicy | None = None,
    private_tools: Sequence[Tool] = (),
    shared_tools: Sequence[Tool] = (),
    state: StateDB | None = None,
    redactor: Redactor | None = None,
    sessions: SessionStore | None = None,
    memory: MemoryService | None = None,
    schedule_desk: ScheduleDesk | None = None,
    press_wiring: Callable[[PressPorts], PressWiring | None] | None = None,
    task_desk: TaskDeskPort | None = None,
) -> GatewayParts:
    """The parts for `settings`, not started (no I/O happens here).

    `private_tools`: more tools for the owner's private contexts (web, schedule tools);
    `shared_tools`: more for group chats too. `sessions`: given when a tool made before the
    parts reads them (the web tools' session links). `memory`: recall and the memory tools.
    `schedule_desk`: the reminders desk (/reminders, the panel). `press_wiring`: called once
    with the ports a feature that asks with buttons needs (the exec approvals,
    gateway/assembly/exec.py); what it returns adds private tools (each offered to whom it
    says) and takes the button presses. `task_desk`: the background tasks' desk, whose
    `start_task` tool is among `private_tools` (the assembly runs its runner)."""
    clock = clock or SystemClock()
    # Masks every configured secret in tool results (gateway/ops/redaction.py); shared with the
    # log formatter.
    redactor = redactor or Redactor.from_settings(settings)
    by_name = {channel.name: channel for channel in channels}
    state = state or StateDB.for_root(  # opened by Gateway.start
        settings.workspaces_dir, inbox_retention=settings.inbox_retention
    )
    lanes, metrics = Lanes(), GatewayMetrics()
    metrics.queue_depth.collect_with(lambda: {(): lanes.depth()})
    versioning = Versioning(
        enabled=settings.versioning.enabled,
        on_commit=lambda reason: metrics.commits.inc(reason=reason),
    )
    models = (
        provider
        if isinstance(provider, ModelRouter)
        else build_router(
            settings, provider, on_fallback=lambda p, e: metrics.fallback(p.model, e.kind)
        )
    )
    metrics.register_models(ref.model for _, ref in models_in_use(settings))
    usage = UsageLedger(state.usage, PriceTable(settings.prices), clock, settings.zone())
    delivery = Delivery(by_name, state.outbox, state.inbox, metrics)
    routes = DmRoutes(state, by_name, delivery, owner=settings.owner, clock=clock)
    budgets = Budgets(settings, usage, routes.note_to_owner)  # notes go to the owner's DM
    accounting = Accounting(usage, budgets, metrics)
    metered = MeteredProvider(models, metrics, accounting)
    capabilities = Capabilities(settings)
    capabilities.register_metrics(metrics.registry)
    router = Router(settings.workspaces_dir, settings.owner, state.links)
    wired = (
        press_wiring(
            PressPorts(router, by_name, delivery, routes, versioning, owner=settings.owner)
        )
        if press_wiring
        else None
    )
    setup = TurnSetup(
        settings,
        clock,
        channels=by_name,
        delivery=delivery,
        metrics=metrics,
        models=models,
        capabilities=capabilities,
        redactor=redactor,
        private_tools=[*private_tools, *(wired.tools if wired else ())],
        shared_tools=shared_tools,
        memory=memory,
        offered=wired.offered if wired else None,
    )
    media = _media_intake(settings, provider, clock, setup)
    agent = AgentLoop(metered, settings.llm.max_tool_rounds, images=_image_window(settings, media))
    sessions = sessions or SessionStore(clock)
    compactor = Compactor(
        metered,
        agent,
        settings.llm,
        settings.compaction,
        clock,
        settings.zone(),
        metrics=metrics,
        versioning=versioning,
        instructions=_instructions(settings, metered, clock, metrics),
    )
    voice = _voice_replies(settings, state, accounting, router)
    turns = TurnRunner(
        sessions,
        agent,
        compactor,
        setup,
        delivery,
        metrics,
        versioning,
        Retries(state.inbox, delivery, metrics),
        state.previews,
        deadline_seconds=settings.limits.turn_deadline_seconds,
        model=provider.model,
        host=endpoint_host(settings.llm.provider, settings.llm.base_url),
        media=_media_step(media, by_name),
        recall=_recall(settings, memory, metrics),
        capture=_capture(settings, agent, metrics),
        instructions=compactor.instructions,  # the compactor's keeper: one for both
        voice=voice,
    )
    commands = CommandContexts(
        settings,
        sessions,
        compactor,
        models,
        setup,
        schedule_desk,
        usage=usage,
        budgets=budgets,
        voice=voice.choices if voice is not None else VoiceChoices(settings.media.speech),
        tasks=state.tasks if settings.tasks.enabled else None,
    )
    limits = PersonLimits(
        clock, settings.limits.queue_per_person, settings.limits.messages_per_minute
    )
    return GatewayParts(
        settings,
        provider,
        clock,
        redactor,
        access or LocalOnlyAccess(),
        by_name,
        state,
        router,
        sessions,
        lanes,
        limits,
        metrics,
        versioning,
        models,
        usage,
        budgets,
        accounting,
        metered,
        media,
        capabilities,
        setup,
        compactor,
        delivery,
        routes,
        turns,
        voice,
        commands,
        memory,
        schedule_desk,
        wired.presses if wired else None,
        task_desk,
    )


def _voice_replies(
    settings: Settings, state: StateDB, accounting: Accounting, router: Router
) -> VoiceReplies | None:
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
        workspace = workspace_path(
            settings.workspaces_dir, await router.person_for(channel, sender_id)
        )
        return workspace if workspace.is_dir() else None

    return VoiceReplies(
        speech,
        make_speaker,
        state.path.parent / VOICE_DIR,
        accounting=accounting,
        billed=speech.backend == "openai",
        person_workspace=person_workspace,
    )


def _instructions(
    settings: Settings, metered: Provider, clock: Clock, metrics: GatewayMetrics
) -> InstructionKeeper | None:
    """Standing instructions (gateway/agent/instructions.py), unless turned off."""
    if not settings.memory.standing_instructions:
        return None
    from gateway.agent.instructions import InstructionKeeper

    return InstructionKeeper(metered, clock, settings.zone(), metrics.registry)


def _media_step(
    media: MediaIntake | None, channels: dict[str, Channel]
) -> Callable[[Route, InboundMessage], Awaitable[UserContent]] | None:
    """The turn's media step: its user message from the attachments (None: media off)."""
    if media is None:
        return None
    intake = media

    async def take(route: Route, msg: InboundMessage) -> UserContent:
        """The turn's user message from `msg`'s attachments, fetched through its channel."""
        return await intake.take(msg, channels[route.channel], route.workspace, route.access)

    return take


def _recall(
    settings: Settings, memory: MemoryService | None, metrics: GatewayMetrics
) -> AutoRecall | None:
    """Memory hits before each private turn, when there is an index and `auto_recall` is on."""
    if memory is None or not settings.memory.auto_recall:
        return None
    from gateway.pipeline.auto_recall import AutoRecall, RecallOptions

    return AutoRecall(memory, RecallOptions.from_settings(settings.memory), metrics.registry)


def _capture(settings: Settings, agent: AgentLoop, metrics: GatewayMetrics) -> Capture | None:
    """The silent claim-capture step after a reply, when `capture_claims` is on."""
    if not settings.memory.capture_claims:
        return None
    from gateway.pipeline.capture import Capture

    return Capture(agent, metrics.registry)


def _media_intake(
    settings: Settings, provider: Provider, clock: Clock, setup: TurnSetup
) -> MediaIntake | None:
    if not settings.media.enabled:
        return None
    from gateway.agent.media.audio import build_transcriber
    from gateway.agent.media.intake import MediaIntake

    zone = settings.zone()
    return MediaIntake(
        settings.media,
        build_transcriber(settings.media.transcription),
        provider=settings.llm.provider,
        model=provider.model,
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

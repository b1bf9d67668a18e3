"""`clawgate doctor`: check what a first start needs, each failure with its fix.

The provider check is real: one small request (a few output tokens, one tool offered) to
every model in use (the main one, each fallback, the background model, the per-person ones),
each on its own endpoint without the others behind it. It tells apart "nothing listens
there", "the key is refused", "no such model or endpoint" and "the model does not take
tools", the four ways a first start goes wrong with a correct-looking configuration, and
says when a model has no price (its cost would count as $0 against money caps). Each
configured bot token is tried against its platform (gateway/cli/doctor_channels.py).
"""

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import typer

from gateway.config.settings import (
    ConfigError,
    Settings,
    config_path,
    load_settings,
    unknown_env_vars,
)

Check = tuple[bool, str, str]  # (passed, what was checked, how to fix it)
PROBE_TIMEOUT_SECONDS = 20.0
PROBE_TOOL_NAME = "clawgate_doctor_probe"


def register(app: typer.Typer) -> None:
    app.command(
        "doctor",
        help="check the configuration, the provider (one real request), "
        "each bot token (Telegram getMe, Discord login), sqlite-vec "
        "and the workspaces directory",
    )(doctor_command)


def doctor_command() -> None:
    import os

    checks: list[Check] = []
    try:
        config = load_settings()
        source = (
            f"{config_path()} + environment"
            if config_path().exists()
            else f"environment; no {config_path()}"
        )
        checks.append((True, f"configuration ({source}) is valid", ""))
        if config.llm.provider_inferred:
            checks.append(
                (
                    True,
                    f"provider openai, inferred from [llm] base_url "
                    f"{config.llm.base_url} (it ends in /v1)",
                    "",
                )
            )
    except ConfigError as exc:
        checks.append((False, "configuration is invalid", str(exc)))
        raise typer.Exit(_report(checks)) from None
    for warning in unknown_env_vars(os.environ):
        checks.append((False, warning, "rename or remove that variable"))
    try:
        key = config.api_key()
    except ConfigError as exc:
        checks.append((False, "no provider API key", str(exc)))
    else:
        if key == "no-key":
            checks.append(
                (
                    True,
                    f"no API key set: using {config.llm.base_url} without one "
                    "(fine for a local server)",
                    "",
                )
            )
        else:
            checks.append((True, f"API key for {config.llm.provider} is set", ""))
        checks.extend(asyncio.run(_check_models(config)))
    from gateway.cli.doctor_channels import check_channels

    checks.extend(asyncio.run(check_channels(config)))
    try:
        from memory.sqlite import vec_version

        checks.append((True, f"sqlite-vec {vec_version()} loads", ""))
    except Exception as exc:
        checks.append(
            (
                False,
                "sqlite-vec does not load",
                f"{exc}. Reinstall with: pip install sqlite-vec pysqlite3-binary",
            )
        )
    checks.append(_check_writable(config.workspaces_dir))
    checks.append(_check_sandbox(config))
    raise typer.Exit(_report(checks))


def _check_sandbox(config: Settings) -> Check:
    """Whether the exec tool's sandbox runs here (a real run of bubblewrap), and if not,
    why and what to do: without it the tool is not offered (never a host shell)."""
    if not config.exec.enabled:
        return (True, "commands are off ([exec] enabled = false)", "")
    from gateway.features.exec.sandbox import probe

    availability = probe(config.exec, config.exec.bwrap or None)
    if availability.ok:
        return (
            True,
            f"the command sandbox works (bubblewrap {availability.version} at "
            f"{availability.bwrap})",
            "",
        )
    return (
        False,
        f"the exec tool is not offered: {availability.reason}",
        f"{availability.remedy} (or set [exec] enabled = false to run without commands)",
    )


async def _check_models(config: Settings) -> list[Check]:
    """One probe per model in use; the routed ones say what they are for."""
    from gateway.agent.providers import models_in_use
    from gateway.stores.prices import PriceTable

    prices = PriceTable(config.prices)
    budget = config.budget
    money_caps = bool(
        budget.daily_usd
        or budget.monthly_usd
        or any(own.daily_usd or own.monthly_usd for own in budget.workspaces.values())
    )
    checks: list[Check] = []
    seen = set()
    for role, ref in models_in_use(config):
        if ref in seen:
            continue
        seen.add(ref)
        ok, what, fix = await _check_provider(config, ref)
        checks.append((ok, what if role == "main" else f"{role} model: {what}", fix))
        if not prices.known(ref.model):
            # A local model may well be free; with a money cap set, $0 would never reach it.
            checks.append(
                (
                    not money_caps,
                    f"no price known for model {ref.model}: its cost "
                    "counts as $0 in /usage and against money caps",
                    f'add [prices."{ref.model}"] input = ... output = ... '
                    "(US$ per million tokens) to clawgate.toml"
                    if money_caps
                    else "",
                )
            )
    return checks


async def _check_provider(config: Settings, ref: Any = None) -> Check:
    from gateway.agent.conversation import Message, SystemPrompt, ToolSpec
    from gateway.agent.providers import build_endpoint
    from gateway.agent.providers.base import ProviderError
    from gateway.config.models import MAIN_ENDPOINT, PROVIDERS
    from gateway.config.settings import provider_hint
    from gateway.pipeline.replies import endpoint_host

    llm = config.llm.model_copy(
        update={
            "max_output_tokens": 16,
            "max_attempts": 1,
            "timeout_seconds": PROBE_TIMEOUT_SECONDS,
        }
    )
    probe_config = config.model_copy(update={"llm": llm})
    ref = ref or llm.main_ref()
    if ref.endpoint == MAIN_ENDPOINT:
        kind, base_url = llm.provider, llm.base_url
    elif ref.endpoint in PROVIDERS:
        kind, base_url = ref.endpoint, None
    else:
        kind, base_url = llm.endpoints[ref.endpoint].provider, llm.endpoints[ref.endpoint].base_url
    host = endpoint_host(kind, base_url)
    where = f"{kind} at {host}, model {ref.model}"
    tool = ToolSpec(
        PROBE_TOOL_NAME,
        "Answers nothing; offered to check tool support.",
        {"type": "object", "properties": {}},
    )
    system = SystemPrompt("Reply with the single word: ok")
    messages = [Message("user", "ping")]
    try:
        provider = build_endpoint(probe_config, ref)
    except ConfigError as exc:
        return (False, f"no API key for {where}", str(exc))
    try:
        try:
            await provider.complete(system, messages, [tool])
            return (True, f"provider answers: {where}, tools accepted", "")
        except ProviderError as exc:
            first = exc
        if first.kind == "bad_request" and "tool" in str(first).lower():
            try:
                await provider.complete(system, messages, [])
            except ProviderError:
                pass
            else:
                return (
                    False,
                    f"provider answers ({where}) but the model does not take tools",
                    "clawgate needs tool calling: pick a model that supports it (for "
                    "Ollama: `ollama pull qwen3` or `llama3.1`)",
                )
        hint = provider_hint(
            kind, base_url, llm.provider_inferred and ref.endpoint == MAIN_ENDPOINT
        )
        return _explain(first, where, host, base_url, hint)
    finally:
        await provider.close()


def _explain(exc: Exception, where: str, host: str, base_url: str | None, hint: str = "") -> Check:
    kind = getattr(exc, "kind", "")
    status = getattr(exc, "status", None)
    if kind in ("connection", "timeout"):
        fix = (
            f"start the server or correct CLAWGATE_LLM__BASE_URL ({base_url})"
            if base_url
            else "check the network connection"
        )
        return (False, f"provider not reachable: {where} ({kind})", fix)
    if kind == "auth":
        return (
            False,
            f"provider refused the API key (HTTP {status}): {where}",
            "set the right key (ANTHROPIC_API_KEY / OPENAI_API_KEY or [llm] api_key)",
        )
    if kind == "bad_request" and status == 404:
        fix = (
            "check CLAWGATE_LLM__MODEL and CLAWGATE_LLM__BASE_URL (an OpenAI-compatible "
            "server usually ends in /v1)"
        )
        if base_url and "11434" in base_url:
            fix += "; for Ollama: `ollama pull MODEL` and use that name"
        if hint:
            fix = f"{hint}; else {fix}"
        return (False, f"no such model or endpoint (HTTP 404): {where}", fix)
    if kind == "context_overflow":
        return (
            False,
            f"provider says the prompt is too long: {where}",
            "match [llm] context_window to the server's context length",
        )
    fix = "see the message; `clawgate chat --debug` shows more"
    return (False, f"provider request failed: {where}: {exc}", f"{hint}; {fix}" if hint else fix)


def _check_writable(root: Path) -> Check:
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
            pass
    except OSError as exc:
        return (
            False,
            f"workspaces root {root} is not writable",
            f"{exc.strerror}. Set CLAWGATE_WORKSPACES_DIR to a writable directory.",
        )
    return (True, f"workspaces root {root.resolve()} is writable", "")


def _report(checks: list[Check]) -> int:
    for ok, what, fix in checks:
        print(f"{'ok ' if ok else 'FAIL'} {what}")
        if fix:
            print(f"     fix: {fix}")
    failed = sum(not ok for ok, _, _ in checks)
    print("all checks passed" if not failed else f"{failed} check(s) failed")
    return 0 if not failed else 1

"""Secrets: one redaction for tool results, files, logs and CLI output; quiet HTTP loggers.

The embeddings endpoint here answers 401 quoting the key it received, as some real ones do.
Before the shared `Redactor`, that text went into the memory_search tool result, hence the
model request, the transcript, the recall index (transcripts are indexed) and backups.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import sys
from pathlib import Path

from gateway.config.memory import build_memory_service
from gateway.ops.logs import setup_logging
from gateway.ops.redaction import Redactor
from gateway.workspace.seed import ensure_workspace
from tests.conftest import TEST_KEY
from tests.fakes.embeddings_server import FakeEmbeddingsServer

MEMORY_KEY = "sk-memory-key-5f3e9a1c77d2"
REPO = Path(__file__).resolve().parents[2]


def _all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


async def test_embeddings_error_echoing_the_key_reaches_no_model_file_or_log(
    anthropic_server, make_gateway, tmp_path
):
    log = io.StringIO()
    async with FakeEmbeddingsServer() as embeddings:
        embeddings.fail_with, embeddings.echo_key = 401, True
        memory = {
            "embedder": "openai",
            "base_url": embeddings.base_url,
            "api_key": MEMORY_KEY,
            "watch": False,
        }
        gateway, channel = await make_gateway(
            anthropic_server,
            owner="fakechat-alice",
            memory=memory,
            memory_service=lambda settings: build_memory_service(settings.memory),
        )
        service = gateway.memory
        assert service is not None
        handler = setup_logging(
            gateway.settings.model_copy(update={"log_level": "DEBUG"}),
            stream=log,
            redactor=gateway.redactor,
        )
        ws = ensure_workspace(tmp_path / "workspaces", "fakechat-alice")
        (ws / "MEMORY.md").write_text("- The boat is called Saudade.\n")
        anthropic_server.reply_tool_call("memory_search", {"query": "name of the boat"})
        anthropic_server.reply_text("It is Saudade.")
        await channel.inject("alice", "what's my boat called?")
        await channel.wait_for(1)
        # A second turn indexes the first turn's transcript (with the tool result) as well.
        anthropic_server.reply_tool_call("memory_search", {"query": "boat"})
        anthropic_server.reply_text("Still Saudade.")
        await channel.inject("alice", "and again?")
        await channel.wait_for(2)
        await service.close()
        logging.getLogger().removeHandler(handler)
    assert any(MEMORY_KEY in a for a in embeddings.authorizations)  # the key was used
    tool_results = [
        b
        for r in anthropic_server.requests
        for m in r["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert tool_results and "[redacted]" in json.dumps(tool_results)  # the echo happened
    assert MEMORY_KEY not in json.dumps(anthropic_server.requests)
    assert MEMORY_KEY.encode() not in _all_bytes(tmp_path / "workspaces")  # transcripts, index
    assert "memory_search" in log.getvalue()  # the log did record the turn
    assert MEMORY_KEY not in log.getvalue() and MEMORY_KEY not in " ".join(channel.texts())


async def test_cli_output_never_shows_a_configured_secret(tmp_path):
    ws = ensure_workspace(tmp_path / "workspaces", "owner")
    (ws / "MEMORY.md").write_text("- The boat is called Saudade.\n")
    async with FakeEmbeddingsServer() as embeddings:
        embeddings.fail_with, embeddings.echo_key = 401, True
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWGATE_")}
        env.update(
            PYTHONPATH=str(REPO),
            CLAWGATE_MEMORY__EMBEDDER="openai",
            CLAWGATE_MEMORY__BASE_URL=embeddings.base_url,
            CLAWGATE_MEMORY__API_KEY=MEMORY_KEY,
        )
        outputs = []
        for args in (["memory", "index"], ["memory", "search", "boat"], ["memory", "status"]):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "gateway",
                *args,
                "--workspace",
                str(ws),
                env=env,
                cwd=tmp_path,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(), 60)
            outputs.append(out.decode() + err.decode())
    text = "\n".join(outputs)
    assert any(MEMORY_KEY in a for a in embeddings.authorizations)
    assert "[redacted]" in text, text  # the echo reached the output, masked
    assert MEMORY_KEY not in text


def test_redactor_masks_registered_secrets_and_url_credentials():
    redact = Redactor([TEST_KEY, "abc"])  # too short to mask: would mangle words
    redact.add("mcp-env-secret-77")
    text = (
        f"{TEST_KEY} mcp-env-secret-77 abc https://bob:hunter22@proxy.example/v1 "
        "https://x.example/v1?api-key=zzz999&b=2 https://api.telegram.org/bot12345:"
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/getMe key=plain"
    )
    out = redact(text)
    for secret in (TEST_KEY, "mcp-env-secret-77", "hunter22", "zzz999", "AAAAAAAAAAAAAAA"):
        assert secret not in out
    assert "abc" in out and "&b=2" in out and "key=plain" in out


async def test_openai_sdk_logs_no_request_url_at_info(openai_server, make_settings, caplog):
    """openai 3.x logs each request URL at INFO through `httpx2`; a URL may carry credentials
    (`user:password@`, `?api-key=`), so HTTP client loggers are held at WARNING."""
    from gateway.agent.conversation import Message, SystemPrompt
    from gateway.agent.providers import build_provider

    url = openai_server.base_url.replace("http://", "http://bob:hunter22secret@")
    settings = make_settings(
        llm={"provider": "openai", "base_url": url, "api_key": TEST_KEY, "max_attempts": 1},
        log_level="INFO",
    )
    caplog.set_level(logging.INFO)
    handler = setup_logging(settings)
    try:
        openai_server.reply_text("hello")
        await build_provider(settings).complete(SystemPrompt("test"), [Message("user", "hi")], [])
    finally:
        logging.getLogger().removeHandler(handler)
    assert openai_server.requests  # the call was made
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.levelno < logging.WARNING
        and r.name.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2", "openai")
    ]
    assert not lines, lines
    assert "hunter22secret" not in caplog.text


async def test_a_secret_registered_later_is_masked_in_logs_and_tool_results(
    anthropic_server, make_gateway
):
    from gateway.ops.logs import share_redactor

    gateway, channel = await make_gateway(anthropic_server)
    log = io.StringIO()
    handler = setup_logging(gateway.settings, stream=log)
    try:
        share_redactor(gateway.redactor)
        gateway.redactor.add("mcp-server-token-31337")  # e.g. an MCP server's env secret
        logging.getLogger("clawgate.test").warning("token is mcp-server-token-31337")
        ws = gateway.settings.workspaces_dir / "fakechat-zed"
        await channel.inject("zed", "hi")
        await channel.wait_for(1)
        (ws / "notes.md").write_text("the token: mcp-server-token-31337\n")
        anthropic_server.reply_tool_call("read_file", {"path": "notes.md"})
        anthropic_server.reply_text("ok")
        await channel.inject("zed", "read notes")
        await channel.wait_for(2)
    finally:
        logging.getLogger().removeHandler(handler)
    assert ws.is_dir()
    assert "mcp-server-token-31337" not in log.getvalue() and "[redacted]" in log.getvalue()
    assert "mcp-server-token-31337" not in json.dumps(anthropic_server.requests[-1])

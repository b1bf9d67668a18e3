"""`clawgate doctor` probes every model in use, each on its own endpoint, and names the ones
that fail and the ones without a price."""

from __future__ import annotations

from tests.fakes.llm_server import FakeOpenAIServer
from tests.gateway.cli.test_cli import _env, _run


async def test_doctor_checks_the_main_fallback_background_and_personal_models(
    tmp_path, anthropic_server
):
    async with FakeOpenAIServer() as backup:
        env = _env(
            tmp_path,
            ANTHROPIC_API_KEY="sk-x",
            CLAWGATE_LLM__BASE_URL=anthropic_server.base_url,
            CLAWGATE_LLM__FALLBACKS="backup:gpt-backup",
            CLAWGATE_LLM__BACKGROUND_MODEL="claude-haiku-5-5",
            CLAWGATE_LLM__WORKSPACES__ANN__MODEL="claude-ann",
            CLAWGATE_LLM__ENDPOINTS__BACKUP__BASE_URL=backup.base_url,
            CLAWGATE_LLM__ENDPOINTS__BACKUP__API_KEY="sk-backup",
        )
        code, out, _ = await _run(["doctor"], env)
        assert code == 0, out
        assert [r["model"] for r in anthropic_server.requests] == [
            "claude-sonnet-5-5",
            "claude-haiku-5-5",
            "claude-ann",
        ]
        assert [r["model"] for r in backup.requests] == ["gpt-backup"]  # on its own endpoint
        assert "fallback model: provider answers: openai at 127.0.0.1" in out
        assert "no price known for model gpt-backup" in out  # a note: no money cap is set

        backup.reply_error(401)
        code, out, _ = await _run(["doctor"], {**env, "CLAWGATE_BUDGET__DAILY_USD": "1"})
        assert code == 1
        assert "FAIL fallback model: provider refused the API key (HTTP 401)" in out
        assert "FAIL no price known for model gpt-backup" in out and "[prices." in out
        assert "sk-backup" not in out

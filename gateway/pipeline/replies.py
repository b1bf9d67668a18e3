"""What the person is told when something outside their control failed.

One short line, no stack trace, no secret, and always the reassurance that their message was
kept: the session stays usable for the next message.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from gateway.agent.providers.base import ProviderError

DEFAULT_HOSTS = {"anthropic": "api.anthropic.com", "openai": "api.openai.com"}

_TRANSIENT = {
    "rate_limit": "the model provider is rate-limiting requests",
    "overloaded": "the model provider is overloaded",
    "server": "the model provider had a server error",
    "timeout": "the model provider did not answer in time",
    "connection": "the model provider could not be reached",
    "bad_response": "the model provider sent a reply I could not read",
}


def endpoint_host(provider: str, base_url: str | None) -> str:
    """host[:port] of the provider endpoint: what a person compares with their setting."""
    if base_url:
        parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
        return parts.netloc or base_url
    return DEFAULT_HOSTS.get(provider, provider)


def provider_error_reply(exc: ProviderError, *, model: str = "", host: str = "") -> str:
    tried = f" (tried {exc.attempts} times)" if exc.attempts > 1 else ""
    if exc.kind in _TRANSIENT:
        return (
            f"Sorry, {_TRANSIENT[exc.kind]}{tried}. Your message is saved; "
            "send it again in a minute."
        )
    if exc.kind == "budget":
        return str(exc)  # the polite refusal (gateway/pipeline/budgets.py)
    if exc.kind == "auth":
        return (
            "The model provider rejected the gateway's API key. The operator needs to check "
            "the key (clawgate doctor helps). Your message is saved."
        )
    if exc.kind == "context_overflow":
        return (
            "This conversation no longer fits in the model's context window, even after "
            "compacting. Send /compact to try again, or /new to start fresh (the old "
            "session stays on disk)."
        )
    status = f"HTTP {exc.status}" if exc.status else exc.kind
    where = f" from {host}" if host else ""
    which = f" for model {model}" if model else ""
    hint = ""
    if (
        exc.status == 404
        and host
        and host not in DEFAULT_HOSTS.values()
        and str(exc).startswith("anthropic:")
    ):
        # The usual first-day mistake: a local OpenAI-style server spoken to in Anthropic's API.
        hint = (
            f" If {host} is an OpenAI-compatible server (Ollama, vLLM, LM Studio), set "
            "CLAWGATE_LLM__PROVIDER=openai and end CLAWGATE_LLM__BASE_URL in /v1."
        )
    return (
        f"The model provider refused the request ({status}{where}{which}).{hint} The "
        "operator can check the endpoint and model with `clawgate doctor`. Your message "
        "is saved."
    )

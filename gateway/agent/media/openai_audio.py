"""An OpenAI-compatible audio endpoint, either way: the SDK client and what its errors mean.

Voice notes in (`/audio/transcriptions`, audio.py) and replies out (`/audio/speech`,
speech.py) talk to the same kind of server with the same SDK, and fail the same ways. Each
failure is one of the caller's two exceptions: `unavailable` when a setting must change (the
key, the model, the address; its text names the setting) or `failed` when only this request
went wrong. The client is made at first use, with no retries (the caller decides) and the
caller's timeout.
"""

from __future__ import annotations

from typing import Any


class AudioEndpoint:
    def __init__(
        self,
        section: str,
        *,
        api_key: str,
        base_url: str | None,
        timeout_seconds: float,
        own_server: str,
        unavailable: type[Exception],
        failed: type[Exception],
    ) -> None:
        """`section` is the `[media.<section>]` of the settings ("transcription",
        "speech"); `own_server` says what `base_url` is for, in the keyless hint."""
        self.section = section
        self.base_url = base_url
        self.timeout_seconds = timeout_seconds
        self._api_key = api_key
        self._own_server = own_server
        self._unavailable = unavailable
        self._failed = failed
        self._prefix = f"CLAWGATE_MEDIA__{section.upper()}"
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            if not self._api_key and not self.base_url:
                raise self._unavailable(
                    f"the openai {self.section} backend has no key: set `OPENAI_API_KEY` or "
                    f"`{self._prefix}__API_KEY` (and `{self._prefix}__BASE_URL` for "
                    f"{self._own_server})"
                )
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key or "unused",
                base_url=self.base_url or None,
                timeout=self.timeout_seconds,
                max_retries=0,
            )
        return self._client

    def failure(self, exc: Exception) -> Exception:
        """The caller's exception for an SDK error (raise it `from exc`)."""
        import openai

        if isinstance(exc, openai.AuthenticationError):
            return self._unavailable(
                f"the {self.section} endpoint refused the key: check `{self._prefix}__API_KEY` "
                "(or `OPENAI_API_KEY`)"
            )
        if isinstance(exc, openai.NotFoundError):
            return self._unavailable(
                f"the {self.section} endpoint does not know this model or path: check "
                f"`{self._prefix}__MODEL` and `..._BASE_URL`"
            )
        if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError):
            return self._failed(f"the {self.section} service could not be reached")
        if isinstance(exc, openai.APIStatusError):
            return self._failed(f"the {self.section} service answered {exc.status_code}")
        return self._failed(f"the {self.section} service sent an unusable answer")

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

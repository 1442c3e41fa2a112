"""Who answers the orchestrator's prompt: an OpenAI-compatible HTTP endpoint or an offline rule.

Every provider has `complete(request) -> str`, the raw answer text; the orchestrator parses it.
A provider that cannot produce an answer raises `ProviderError` (the outcome `api_failure`).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ProviderRequest:
    """What a provider sees: the prompt, and (for offline rules) the pool's ids and the gold id."""

    prompt: str
    candidate_ids: Sequence[str]
    gold: str | None = None


class ProviderError(Exception):
    """The provider gave no usable answer (HTTP error, timeout, malformed response)."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class Provider(Protocol):
    name: str

    def complete(self, request: ProviderRequest) -> str: ...


class FirstProvider:
    """Always candidate 1 (what a trusting orchestrator does with a ranked pool)."""

    name = "first"

    def complete(self, request: ProviderRequest) -> str:
        return "1"


class OracleProvider:
    """The gold card's position when it is in the pool, else candidate 1: the ceiling of a pool."""

    name = "oracle"

    def complete(self, request: ProviderRequest) -> str:
        ids = list(request.candidate_ids)
        if request.gold is not None and request.gold in ids:
            return str(ids.index(request.gold) + 1)
        return "1"


class RandomProvider:
    """A uniformly random candidate from a seeded generator: the floor of a pool."""

    name = "random"

    def __init__(self, seed: int = 0):
        self._rng = random.Random(seed)

    def complete(self, request: ProviderRequest) -> str:
        return str(self._rng.randint(1, max(1, len(request.candidate_ids))))


SYSTEM_PROMPT = "You route user requests to agents. Reply with the number of the best agent only."


class OpenAIChatProvider:
    """A chat-completions client for any OpenAI-compatible endpoint (standard library HTTP).

    POSTs `{base_url}/chat/completions` with the prompt as the user message and returns
    `choices[0].message.content`. The API key is read from the environment variable
    `api_key_env` (no Authorization header when it is unset: local servers need none).
    HTTP 429, 5xx, timeouts and connection errors are retried up to `max_retries` times with
    exponential backoff (`backoff * 2**attempt`, capped at `backoff_max`; a numeric
    Retry-After header is honoured within the same cap). Other HTTP errors fail at once.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
        max_tokens: int = 16,
        temperature: float = 0.0,
        system_prompt: str | None = SYSTEM_PROMPT,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.system_prompt = system_prompt
        self._sleep = sleep
        self.calls = 0  # HTTP requests sent, retries included

    def _body(self, prompt: str) -> bytes:
        messages = [{"role": "user", "content": prompt}]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        payload = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        return json.dumps(payload).encode("utf-8")

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = self.backoff * (2**attempt)
        if retry_after is not None:
            try:
                delay = max(delay, float(retry_after))
            except ValueError:
                pass  # an HTTP date: keep our own schedule
        return min(delay, self.backoff_max)

    def complete(self, request: ProviderRequest) -> str:
        body = self._body(request.prompt)
        last = "no attempt made"
        status: int | None = None
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                self.calls += 1
                req = urllib.request.Request(self.url, data=body, headers=self._headers(), method="POST")
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
                return _answer_text(raw, attempt + 1)
            except urllib.error.HTTPError as exc:
                status = exc.code
                last = f"HTTP {exc.code} {exc.reason}"
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                exc.close()
                if not (exc.code == 429 or 500 <= exc.code <= 599):
                    raise ProviderError(last, status=status, attempts=attempt + 1) from exc
            except TimeoutError:
                status, last = None, f"timed out after {self.timeout}s"
            except urllib.error.URLError as exc:
                status = None
                timed_out = isinstance(exc.reason, TimeoutError)
                last = f"timed out after {self.timeout}s" if timed_out else f"connection failed: {exc.reason}"
            except (ConnectionError, http.client.HTTPException) as exc:
                status, last = None, f"connection failed: {exc!r}"
            if attempt < self.max_retries:
                self._sleep(self._delay(attempt, retry_after))
        raise ProviderError(f"{last} (after {self.max_retries + 1} attempts)", status=status,
                            attempts=self.max_retries + 1)


def _answer_text(raw: bytes, attempts: int) -> str:
    """choices[0].message.content of a chat-completions response, or ProviderError."""
    try:
        data: Any = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProviderError(f"malformed response: not JSON ({exc})", attempts=attempts) from exc
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ProviderError("malformed response: no choices[0].message.content", attempts=attempts) from exc
    if not isinstance(content, str):
        raise ProviderError("malformed response: message content is not a string", attempts=attempts)
    return content


OFFLINE = ("first", "oracle", "random")


def make_provider(name: str, *, seed: int = 0, **http_options: Any) -> Provider:
    """A provider by name: `first`, `oracle`, `random` (seeded) or `openai` (needs base_url, model)."""
    if name == "first":
        return FirstProvider()
    if name == "oracle":
        return OracleProvider()
    if name == "random":
        return RandomProvider(seed)
    if name == "openai":
        return OpenAIChatProvider(**http_options)
    raise ValueError(f"unknown provider {name!r} (choose from first, oracle, random, openai)")

"""Who answers the orchestrator's prompt: an OpenAI-compatible HTTP endpoint or an offline rule.

Every provider has `complete(request) -> str`, the raw answer text; the orchestrator parses it.
A provider that cannot produce an answer raises `ProviderError` (the outcome `api_failure`).
"""

from __future__ import annotations

import http.client
import json
import math
import os
import random
import socket
import ssl
import threading
import time
import urllib.parse
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

ANSWER_FORMATS = ("text", "json", "tool")
# the JSON object a structured answer must be (response_format json_schema, or the tool's arguments)
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"index": {"type": "integer", "description": "1-based number of the chosen agent"}},
    "required": ["index"],
    "additionalProperties": False,
}
ANSWER_TOOL = "select_agent"


class _Deadline(Exception):
    pass


class OpenAIChatProvider:
    """A chat-completions client for any OpenAI-compatible endpoint (standard library HTTP).

    POSTs `{base_url}/chat/completions` with the prompt as the user message and returns the
    answer text: `choices[0].message.content`, or, with `answer_format="tool"`, the arguments
    of the forced `select_agent` tool call (`{"index": n}`). `answer_format="json"` asks for a
    JSON object through `response_format` (json_schema, strict).

    Output length is sent as `max_completion_tokens` (what current OpenAI models, reasoning
    ones included, accept); a server that rejects that parameter (HTTP 400/422 naming it) is
    asked again with `max_tokens`, and the provider remembers which one worked.

    Safety: the API key (environment variable `api_key_env`; no Authorization header when it
    is unset) goes only to the base URL's origin: redirects are never followed (a 3xx is an
    `api_failure`). `timeout` is a total deadline per HTTP request (connect, headers and body:
    a server dripping one byte at a time is cut off when it expires), and a body larger than
    `max_response_bytes` is refused without being read whole.
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
        temperature: float | None = 0.0,
        system_prompt: str | None = SYSTEM_PROMPT,
        answer_format: str = "text",
        max_response_bytes: int = 1 << 20,
        token_parameter: str = "max_completion_tokens",
        sleep: Callable[[float], None] = time.sleep,
    ):
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if answer_format not in ANSWER_FORMATS:
            raise ValueError(f"answer_format must be one of {', '.join(ANSWER_FORMATS)}, got {answer_format!r}")
        if token_parameter not in ("max_completion_tokens", "max_tokens"):
            raise ValueError(f"token_parameter must be max_completion_tokens or max_tokens, got {token_parameter!r}")
        if timeout <= 0 or max_response_bytes < 1:
            raise ValueError("timeout and max_response_bytes must be positive")
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._parts = urllib.parse.urlsplit(self.url)
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.system_prompt = system_prompt
        self.answer_format = answer_format
        self.max_response_bytes = max_response_bytes
        self.token_parameter = token_parameter
        self._sleep = sleep
        self.calls = 0  # HTTP requests sent, retries included

    def _payload(self, prompt: str) -> dict[str, Any]:
        messages = [{"role": "user", "content": prompt}]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        payload: dict[str, Any] = {"model": self.model, "messages": messages, self.token_parameter: self.max_tokens}
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        if self.answer_format == "json":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "agent_choice", "strict": True, "schema": ANSWER_SCHEMA},
            }
        elif self.answer_format == "tool":
            payload["tools"] = [{"type": "function", "function": {
                "name": ANSWER_TOOL, "description": "Select the agent that best serves the request.",
                "parameters": ANSWER_SCHEMA, "strict": True}}]
            payload["tool_choice"] = {"type": "function", "function": {"name": ANSWER_TOOL}}
        return payload

    def _body(self, prompt: str) -> bytes:
        return json.dumps(self._payload(prompt)).encode("utf-8")

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
                value = float(retry_after)
            except ValueError:
                value = None  # an HTTP date: keep our own schedule
            if value is not None and math.isfinite(value):
                delay = max(delay, value)
        return min(delay, self.backoff_max)

    def _post(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """One POST under a total deadline: (status, lower-cased headers, body); raises _Deadline."""
        parts = self._parts
        deadline = time.monotonic() + self.timeout
        host, port = parts.hostname or "", parts.port
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=self.timeout, context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        fired = threading.Event()
        held: list[socket.socket] = []

        def expire() -> None:
            # a socket timeout bounds one read only; this bounds the whole exchange. The socket is
            # the one captured at connect: http.client hands it to the response and forgets it
            fired.set()
            for sock in held:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        timer = threading.Timer(self.timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            conn.connect()
            if conn.sock is not None:
                held.append(conn.sock)
            if fired.is_set():  # the deadline passed while connecting
                raise _Deadline()
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            conn.request("POST", path, body=body, headers=self._headers())
            resp = conn.getresponse()
            headers = {k.lower(): v for k, v in resp.getheaders()}
            length = headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > self.max_response_bytes:
                raise ProviderError(f"response of {length} bytes is larger than the {self.max_response_bytes}-byte cap")
            chunks, size = [], 0
            while True:
                chunk = resp.read(min(65536, self.max_response_bytes + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise ProviderError(f"response larger than the {self.max_response_bytes}-byte cap")
                if time.monotonic() > deadline:
                    raise _Deadline()
            if fired.is_set():
                raise _Deadline()
            return resp.status, headers, b"".join(chunks)
        except (OSError, http.client.HTTPException):
            if fired.is_set() or time.monotonic() > deadline:
                raise _Deadline() from None
            raise
        finally:
            timer.cancel()
            conn.close()

    def complete(self, request: ProviderRequest) -> str:
        last = "no attempt made"
        status: int | None = None
        attempt = 0
        switched = False
        while attempt <= self.max_retries:
            retry_after = None
            try:
                self.calls += 1
                status, headers, raw = self._post(self._body(request.prompt))
                if 200 <= status < 300:
                    return _answer_text(raw, attempt + 1, self.answer_format)
                last = f"HTTP {status}"
                retry_after = headers.get("retry-after")
                if 300 <= status < 400:
                    where = headers.get("location", "?")
                    raise ProviderError(f"HTTP {status} redirect to {where!r} not followed (the API key is only "
                                        f"sent to {self._parts.scheme}://{self._parts.netloc})",
                                        status=status, attempts=attempt + 1)
                if status in (400, 422) and not switched and self.token_parameter.encode() in raw:
                    # the server does not know this token-limit parameter: ask once with the other one
                    other = "max_tokens" if self.token_parameter == "max_completion_tokens" else "max_completion_tokens"
                    self.token_parameter, switched = other, True
                    continue
                if not (status == 429 or 500 <= status <= 599):
                    raise ProviderError(last, status=status, attempts=attempt + 1)
            except _Deadline:
                status, last = None, f"timed out after {self.timeout}s (total deadline per request)"
            except TimeoutError:
                status, last = None, f"timed out after {self.timeout}s"
            except (OSError, http.client.HTTPException) as exc:
                status, last = None, f"connection failed: {exc!r}"
            if attempt < self.max_retries:
                self._sleep(self._delay(attempt, retry_after))
            attempt += 1
        raise ProviderError(f"{last} (after {self.max_retries + 1} attempts)", status=status,
                            attempts=self.max_retries + 1)


def _answer_text(raw: bytes, attempts: int, answer_format: str = "text") -> str:
    """The answer of a chat-completions response (content, or the tool call's arguments), or ProviderError."""
    try:
        data: Any = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProviderError(f"malformed response: not JSON ({str(exc)[:200]})", attempts=attempts) from exc
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ProviderError("malformed response: no choices[0].message", attempts=attempts) from exc
    if not isinstance(message, dict):
        raise ProviderError("malformed response: choices[0].message is not an object", attempts=attempts)
    calls = message.get("tool_calls")
    if answer_format == "tool" and isinstance(calls, list) and calls:
        try:
            arguments = calls[0]["function"]["arguments"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ProviderError("malformed response: tool call without function.arguments", attempts=attempts) from exc
        if isinstance(arguments, str):
            return arguments
        raise ProviderError("malformed response: tool call arguments are not a string", attempts=attempts)
    content = message.get("content")
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

"""Orchestrator outcomes through a loopback OpenAI-compatible server, answer parsing, accounting."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ssr_engine.agents.cards import AgentCard, Skill
from ssr_engine.agents.orchestrator import (
    STATUSES,
    build_prompt,
    estimate_tokens,
    input_size,
    orchestrate,
    outcome_counts,
    parse_choice,
)
from ssr_engine.agents.providers import (
    FirstProvider,
    OpenAIChatProvider,
    OracleProvider,
    ProviderError,
    ProviderRequest,
    RandomProvider,
    make_provider,
)

POOL = [
    AgentCard(
        id="a", name="Alpha", description="Books flights.", skills=(Skill(name="Book", description="Book a flight."),)
    ),
    AgentCard(id="b", name="Beta", description="Forecasts weather."),
    AgentCard(id="c", name="", description="Converts currencies."),
]


class Loopback:
    """A threaded chat-completions server on 127.0.0.1 that plays a script of replies.

    Each reply: ("ok", content) | ("status", code) | ("raw", bytes) | ("slow", seconds, content).
    The last reply repeats once the script is used up. Requests are recorded.
    """

    def __init__(self):
        self.script: list[tuple] = [("ok", "1")]
        self.requests: list[dict] = []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                outer.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                reply = outer.script[min(len(outer.requests), len(outer.script)) - 1]
                kind = reply[0]
                if kind == "slow":
                    outer.release.wait(reply[1])
                    reply = ("ok", reply[2])
                    kind = "ok"
                if kind == "status":
                    self.send_response(reply[1])
                    self.send_header("Content-Type", "application/json")
                    if len(reply) > 2:
                        self.send_header("Retry-After", reply[2])
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "busy"}}')
                    return
                data = reply[1] if kind == "raw" else json.dumps(
                    {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply[1]}}]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server():
    s = Loopback()
    yield s
    s.close()


def _client(server, sleeps=None, **kw):
    options = {"timeout": 2.0, "max_retries": 2, "backoff": 0.001, "backoff_max": 0.01, "api_key_env": "SSR_TEST_KEY"}
    options.update(kw)
    return OpenAIChatProvider(server.base_url, "test-model", sleep=(sleeps.append if sleeps is not None else
                                                                    time.sleep), **options)


@pytest.mark.parametrize(
    "content, index", [("2", 2), ("Agent 3", 3), ('{"index": 1}', 1), ('```json\n{"choice": 2}\n```', 2)]
)
def test_selected_through_http(server, monkeypatch, content, index):
    monkeypatch.setenv("SSR_TEST_KEY", "sekrit")
    server.script = [("ok", content)]
    out = orchestrate("book me a flight", POOL, _client(server), gold=None)
    assert (out.status, out.index, out.card_id, out.pool_size) == ("selected", index, POOL[index - 1].id, 3)
    [req] = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sekrit"
    assert req["body"]["model"] == "test-model"
    user = req["body"]["messages"][-1]
    assert user["role"] == "user" and user["content"] == build_prompt("book me a flight", POOL)
    assert out.prompt_chars == len(user["content"])


def test_no_authorization_header_without_a_key(server, monkeypatch):
    monkeypatch.delenv("SSR_TEST_KEY", raising=False)
    assert orchestrate("q", POOL, _client(server)).status == "selected"
    assert "Authorization" not in server.requests[0]["headers"]


@pytest.mark.parametrize("content", ["4", "0", "-1", "none of these", "2.5", '{"index": 9}', ""])
def test_invalid_index_through_http(server, content):
    server.script = [("ok", content)]
    out = orchestrate("q", POOL, _client(server))
    assert out.status == "invalid_index"
    assert out.card_id is None and out.answer == content
    assert len(server.requests) == 1  # a bad answer is not retried


def test_malformed_json_response_is_an_api_failure(server):
    server.script = [("raw", b"<html>oops</html>")]
    out = orchestrate("q", POOL, _client(server))
    assert out.status == "api_failure" and "malformed response" in out.error
    server.script = [("raw", b'{"choices": []}')]
    out = orchestrate("q", POOL, _client(server))
    assert out.status == "api_failure" and "no choices[0].message" in out.error


@pytest.mark.parametrize("code", [429, 500, 503])
def test_retryable_status_then_success(server, code):
    sleeps: list[float] = []
    server.script = [("status", code), ("status", code), ("ok", "2")]
    out = orchestrate("q", POOL, _client(server, sleeps))
    assert out.status == "selected" and out.card_id == "b"
    assert len(server.requests) == 3
    assert sleeps == [0.001, 0.002]  # exponential backoff


@pytest.mark.parametrize("code", [429, 500])
def test_retryable_status_exhausts_retries(server, code):
    server.script = [("status", code)]
    client = _client(server, [])
    out = orchestrate("q", POOL, client)
    assert out.status == "api_failure"
    assert f"HTTP {code}" in out.error and "after 3 attempts" in out.error
    assert len(server.requests) == 3 == client.calls


def test_client_error_is_not_retried(server):
    server.script = [("status", 400)]
    out = orchestrate("q", POOL, _client(server, []))
    assert out.status == "api_failure" and "HTTP 400" in out.error
    assert len(server.requests) == 1


def test_retry_after_is_honoured_within_the_cap(server):
    sleeps: list[float] = []
    server.script = [("status", 429, "5"), ("ok", "1")]
    assert orchestrate("q", POOL, _client(server, sleeps, backoff_max=0.05)).status == "selected"
    assert sleeps == [0.05]


def test_slow_responses_time_out_and_are_retried(server):
    # generous margins: the suite also runs on a loaded 2-core machine
    server.script = [("slow", 20.0, "1")]
    client = _client(server, [], timeout=1.0, max_retries=1)
    t = time.perf_counter()
    out = orchestrate("q", POOL, client)
    assert out.status == "api_failure" and "timed out" in out.error
    assert len(server.requests) == 2
    assert time.perf_counter() - t < 15.0  # two timeouts, not a wait for the slow reply
    server.release.set()


def test_one_slow_response_then_success(server):
    server.script = [("slow", 20.0, "1"), ("ok", "3")]
    out = orchestrate("q", POOL, _client(server, [], timeout=1.0, max_retries=1))
    assert out.status == "selected" and out.card_id == "c"


def test_unreachable_endpoint_is_an_api_failure():
    import socket

    with socket.socket() as s:  # a port that was free a moment ago and has no listener
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = OpenAIChatProvider(f"http://127.0.0.1:{port}", "m", max_retries=1, backoff=0.0, sleep=lambda _: None)
    out = orchestrate("q", POOL, client)
    assert out.status == "api_failure" and "connection failed" in out.error


def test_provider_error_is_kept():
    class Broken:
        name = "broken"

        def complete(self, request):
            raise ProviderError("quota exceeded", status=429, attempts=4)

    out = orchestrate("q", POOL, Broken())
    assert (out.status, out.error, out.card_id) == ("api_failure", "quota exceeded", None)


def test_empty_pool_never_calls_the_provider(server):
    out = orchestrate("q", [], _client(server), gold="a")
    assert out.status == "empty_pool" and out.pool_size == 0
    assert server.requests == []


def test_retrieval_miss_when_gold_is_not_in_the_pool(server):
    out = orchestrate("q", POOL, _client(server), gold="zzz")
    assert out.status == "retrieval_miss"
    assert server.requests == []
    server.script = [("ok", "2")]
    hit = orchestrate("q", POOL, _client(server), gold="b")
    assert hit.status == "selected" and hit.correct
    wrong = orchestrate("q", POOL, _client(server), gold="a")
    assert wrong.status == "selected" and not wrong.correct


def test_offline_providers():
    req = ProviderRequest("p", ["a", "b", "c"], gold="c")
    assert FirstProvider().complete(req) == "1"
    assert OracleProvider().complete(req) == "3"
    assert OracleProvider().complete(ProviderRequest("p", ["a"], gold=None)) == "1"
    a, b, c = RandomProvider(1), RandomProvider(1), RandomProvider(2)
    seq = [a.complete(req) for _ in range(200)]
    assert seq == [b.complete(req) for _ in range(200)]  # seeded: reproducible
    assert seq != [c.complete(req) for _ in range(200)]
    assert set(seq) == {"1", "2", "3"}
    with pytest.raises(ValueError, match="unknown provider"):
        make_provider("gpt")


def test_parse_choice():
    assert parse_choice("3") == 3
    assert parse_choice("  Agent 12.") == 12
    assert parse_choice("I pick #2 of 5") == 2
    assert parse_choice('{"Agent": "4"}') == 4
    assert parse_choice("[5]") == 5
    assert parse_choice("7.0") == 7
    assert parse_choice("2.5") is None
    assert parse_choice("agent3") is None
    assert parse_choice("") is None
    assert parse_choice('{"reason": "none"}') is None
    assert parse_choice("true") is None


def test_outcome_counts_rejects_unknown_statuses():
    counts = outcome_counts(["selected", "empty_pool", "selected"])
    assert counts == {"selected": 2, "empty_pool": 1, "retrieval_miss": 0, "api_failure": 0, "invalid_index": 0}
    assert list(counts) == list(STATUSES)
    with pytest.raises(ValueError, match="unknown outcome status 'timeout'"):
        outcome_counts(["selected", "timeout"])


def test_input_size_accounting():
    query = "book me a flight"
    size = input_size(query, POOL, POOL[:1])
    assert size.full_chars == len(build_prompt(query, POOL))
    assert size.pool_chars == len(build_prompt(query, POOL[:1]))
    assert size.full_tokens == -(-size.full_chars // 4)
    assert size.reduction_pct == pytest.approx(100 * (1 - size.pool_chars / size.full_chars))
    assert estimate_tokens("abcde") == 2 and estimate_tokens(8) == 2 and estimate_tokens("") == 0


def test_prompt_lists_the_pool_numbered_with_skills():
    prompt = build_prompt("need weather", POOL)
    listing = "1. Alpha: Books flights.\n   - skill Book: Book a flight.\n2. Beta: Forecasts weather.\n3. c: Converts"
    assert listing in prompt
    assert prompt.rstrip().endswith("(1-3).")
    assert "User request: need weather" in prompt


def test_cli_ask_through_http_and_offline(tmp_path, server, capsys):
    from ssr_engine.agents.sources import write_cards
    from ssr_engine.cli import main

    src = tmp_path / "cards.jsonl"
    write_cards(POOL, src)
    index = tmp_path / "reg"
    assert main(["agents", "build", "--cards", str(src), "--out", str(index)]) == 0
    capsys.readouterr()
    server.script = [("status", 503), ("ok", "Agent 1")]
    argv = ["agents", "ask", "--index", str(index), "--base-url", server.base_url, "--model", "m",
            "--retries", "1", "--timeout", "2", "flights and weather"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "outcome: selected (pool of 2)" in out and "selected 1: " in out
    assert len(server.requests) == 2
    server.script = [("ok", "9")]
    assert main(argv) == 1
    assert "outcome: invalid_index" in capsys.readouterr().out
    assert main(["agents", "ask", "--index", str(index), "--provider", "first", "unrelated zzz"]) == 1
    assert "outcome: empty_pool (pool of 0)" in capsys.readouterr().out
    assert len(server.requests) == 3

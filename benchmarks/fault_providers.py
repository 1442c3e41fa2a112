"""The provider part of the fault campaign (issue 12): hostile servers on loopback.

    python benchmarks/fault_providers.py [--rounds 3] [--timeout 1.5]

Each round runs every hostile server against `OpenAIChatProvider` through `orchestrate`:
redirects (301, 302, 303, 307, 308) to another origin that would answer, bodies and headers
dripped one byte every 0.5 s, a body over the size cap (with and without Content-Length), a
5,000-digit answer, a non-JSON body, a connection closed without an answer. Counted: key leaks
(any request reaching the other origin), crashes (an exception escaping `orchestrate`), calls
that outlive the deadline (timeout + 3 s of slack for a loaded machine), and the statuses.
Prints JSON (`fault_campaign.py` merges it into its table).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ssr_engine.agents.cards import AgentCard
from ssr_engine.agents.orchestrator import orchestrate
from ssr_engine.agents.providers import OpenAIChatProvider

POOL = [AgentCard(id="a", name="Alpha", description="Books flights."),
        AgentCard(id="b", name="Beta", description="Forecasts weather.")]
KEY = "campaign-secret-key"


class Server:
    """A loopback HTTP server answering every request with handler(request_handler, request); each
    request is logged as {"path", "headers", "body" (decoded JSON)}. Also the provider-safety test's."""

    def __init__(self, handler):
        self.requests: list[dict] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(body) if body else None})
                try:
                    handler(self, outer.requests[-1])
                except OSError:  # the client gave up (deadline): expected
                    pass

            do_GET = do_POST  # noqa: N815

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def send(h, status: int, body: bytes = b"", headers=()) -> None:
    h.send_response(status)
    for k, v in headers:
        h.send_header(k, v)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def reply(content: str | None = None, tool_args: str | None = None) -> bytes:
    """A chat-completions answer: `content`, and a `select_agent` tool call with `tool_args`."""
    message: dict = {"role": "assistant", "content": content}
    if tool_args is not None:
        message["tool_calls"] = [{"id": "c1", "type": "function",
                                  "function": {"name": "select_agent", "arguments": tool_args}}]
    return json.dumps({"choices": [{"index": 0, "message": message}]}).encode()


def drip_body(h, r=None) -> None:
    """Headers promising 100,000 bytes, then one byte every 0.5 s: each read succeeds, the whole never ends."""
    h.send_response(200)
    h.send_header("Content-Length", "100000")
    h.end_headers()
    for _ in range(200):
        h.wfile.write(b" ")
        h.wfile.flush()
        time.sleep(0.5)


def drip_headers(h, r=None) -> None:
    h.wfile.write(b"HTTP/1.1 200 OK\r\n")
    for i in range(200):
        h.wfile.write(f"X-{i}: y\r\n".encode())
        h.wfile.flush()
        time.sleep(0.5)


def chunked_flood(h, r=None) -> None:
    h.send_response(200)
    h.send_header("Connection", "close")
    h.end_headers()
    for _ in range(64):
        h.wfile.write(b"9" * 65536)


def hang_up(h, r=None) -> None:
    h.close_connection = True
    h.connection.close()


CASES = {
    "drip body": drip_body,
    "drip headers": drip_headers,
    "body over the cap": lambda h, r: send(h, 200, b'{"choices": "' + b"1" * (3 << 20) + b'"}'),
    "chunked flood": chunked_flood,
    "5000-digit answer": lambda h, r: send(h, 200, reply("7" * 5000)),
    "not JSON": lambda h, r: send(h, 200, b"<html>no</html>"),
    "hang up": hang_up,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=1.5)
    args = ap.parse_args()
    os.environ["SSR_CAMPAIGN_KEY"] = KEY
    attacker = Server(lambda h, r: send(h, 200, reply("1")))
    cases = dict(CASES)
    for code in (301, 302, 303, 307, 308):
        cases[f"redirect {code} to another origin"] = (
            lambda h, r, code=code: send(h, code, headers=[("Location", attacker.url + "/steal")]))
    counts: Counter[str] = Counter()
    late: list[str] = []
    crashes: list[str] = []
    for _ in range(args.rounds):
        for name, handler in cases.items():
            server = Server(handler)
            client = OpenAIChatProvider(server.url + "/v1", "m", timeout=args.timeout, max_retries=1,
                                        api_key_env="SSR_CAMPAIGN_KEY")
            started = time.monotonic()
            try:
                counts[f"{name}: {orchestrate('book a flight', POOL, client).status}"] += 1
            except Exception as exc:  # noqa: BLE001 - counting exactly what must never happen
                crashes.append(f"{name}: {type(exc).__name__}: {exc}")
            took = time.monotonic() - started
            if took > 2 * args.timeout + 3.0:  # two attempts (max_retries=1), each under the deadline
                late.append(f"{name}: {took:.1f} s")
            server.close()
    leaks = sum(KEY in json.dumps(r) for r in attacker.requests)
    print(json.dumps({"calls": sum(counts.values()) + len(crashes), "statuses": dict(counts),
                      "requests at the other origin": len(attacker.requests), "key leaks": leaks,
                      "crashes": crashes, "over the deadline": late}))
    attacker.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Cards as they are published: A2A v0.3 and v1.0 Agent Cards, MCP tools/list answers, folders.

The fixtures in tests/data/agents follow the shapes of the A2A specification's sample card
(v0.3, and v1.0 with supportedInterfaces) and the MCP specification's tools/list response;
the SDKs themselves check them here (a2a-sdk's v1.0 protobuf AgentCard parsed strictly, its
v0.3 model, mcp's ListToolsResult), so the fixtures are the real shapes, not our idea of them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ssr_engine.agents.cards import capability_values, parse_card
from ssr_engine.agents.discovery import Registry, build_registry
from ssr_engine.agents.sources import iter_cards, read_cards
from ssr_engine.cli import main
from ssr_engine.errors import InputError, SsrError

DATA = Path(__file__).parent / "data" / "agents"
V03 = DATA / "a2a-v0.3-agent-card.json"
V10 = DATA / "a2a-v1.0-agent-card.json"
TOOLS = DATA / "mcp-tools-list-response.json"


def test_fixtures_are_the_sdks_own_shapes():
    import a2a.types as a2a_types  # a2a-sdk (with protobuf) and mcp are in the test extra: never skipped
    import google.protobuf.json_format as json_format
    import mcp.types as mcp_types

    # strict: an unknown field name would raise, so the v1.0 fixture uses exactly the spec's fields
    json_format.ParseDict(json.loads(V10.read_text()), a2a_types.AgentCard())
    v03 = pytest.importorskip("a2a.compat.v0_3.types", reason="a2a-sdk without its v0.3 types")
    v03.AgentCard.model_validate(json.loads(V03.read_text()))
    envelope = json.loads(TOOLS.read_text())
    mcp_types.JSONRPCResponse.model_validate(envelope)
    mcp_types.ListToolsResult.model_validate(envelope["result"])


def test_a2a_v03_card():
    [card] = read_cards(V03)
    assert card.id == "https://georoute-agent.example.com/a2a/v1"  # v0.3: the top-level url
    assert card.name == "GeoSpatial Route Planner Agent"
    assert [s.id for s in card.skills] == ["route-optimizer-traffic", "custom-map-generator"]
    assert card.skills[0].tags == ("maps", "routing", "navigation", "directions", "traffic")
    assert card.skills[1].input_modes == ("application/json",)
    assert "image/jpeg" in card.skills[1].output_modes
    # verbatim: the stored text is the file's, every field kept (security, provider, signatures)
    assert card.raw == V03.read_text().strip()
    assert card.original() == json.loads(V03.read_text())
    # only capability text is indexed: no URLs, versions, provider or security fields
    values = capability_values(card)
    assert "maps" in values and "Traffic-Aware Route Optimizer" in values
    assert not any("example.com" in v or v == "1.2.0" or "openid" in v for v in values)


def test_a2a_v10_card_id_is_the_first_interface_url():
    [card] = read_cards(V10)
    assert card.id == "https://travel.example.com/a2a/v1" == card.url
    original = card.original()
    assert original["supportedInterfaces"][1]["protocolBinding"] == "GRPC"
    assert original["securitySchemes"]["oauth"]["oauth2SecurityScheme"]["flows"]
    assert [s.examples[0] for s in card.skills][0] == "Book a flight from Paris to Lisbon next Friday"


def _tools(tmp_path, shape):
    envelope = json.loads(TOOLS.read_text())
    value = {"envelope": envelope, "result": envelope["result"], "array": envelope["result"]["tools"]}[shape]
    path = tmp_path / f"{shape}.json"
    path.write_text(json.dumps(value, indent=2))
    return path


@pytest.mark.parametrize("shape", ["envelope", "result", "array"])
def test_mcp_tools_list_in_every_shape(tmp_path, shape):
    cards = read_cards(_tools(tmp_path, shape))
    assert [c.id for c in cards] == ["get_weather", "get_forecast"]
    assert all(c.kind == "tool" for c in cards)
    weather = cards[0]
    assert weather.title == "Weather Information Provider"
    assert [(p.name, p.description) for p in weather.params] == [("location", "City name or zip code")]
    assert capability_values(weather) == ["get_weather", "Weather Information Provider",
                                          "Get current weather information for a location", "location",
                                          "City name or zip code"]
    assert weather.original() == json.loads(TOOLS.read_text())["result"]["tools"][0]
    # the line where each tool starts in the user's (pretty-printed) file
    text = (tmp_path / f"{shape}.json").read_text().splitlines()
    for card in cards:
        assert text[card.source_line - 1].strip() == "{" and f'"{card.id}"' in text[card.source_line]


def test_jsonl_of_tools_list_answers_and_cards(tmp_path):
    envelope = json.loads(TOOLS.read_text())
    v10 = json.loads(V10.read_text())
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(envelope) + "\n" + json.dumps(v10) + "\n")
    cards = read_cards(path)
    assert [(c.id, c.source_line) for c in cards] == [("get_weather", 1), ("get_forecast", 1),
                                                      ("https://travel.example.com/a2a/v1", 2)]


def test_json_rpc_error_and_non_tools_messages_are_refused(tmp_path):
    bad = tmp_path / "err.json"
    bad.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}))
    with pytest.raises(InputError, match=r"err.json:1: card #1: a JSON-RPC error response.*Method not found"):
        read_cards(bad)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"resources": []}}) + "\n")
    with pytest.raises(InputError, match=r"other.jsonl:1: .*expected a tools/list response"):
        read_cards(other)


def test_well_known_folder_layout(tmp_path):
    for name, src in (("travel", V10), ("geo", V03)):
        d = tmp_path / name / ".well-known"
        d.mkdir(parents=True)
        (d / "agent-card.json").write_text(src.read_text())
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config.json").write_text("not json at all")  # hidden folders are not read
    tools = tmp_path / "weather-server" / "tools.json"
    tools.parent.mkdir()
    tools.write_text(TOOLS.read_text())
    cards = read_cards(tmp_path)
    assert [c.id for c in cards] == ["https://georoute-agent.example.com/a2a/v1", "https://travel.example.com/a2a/v1",
                                     "get_weather", "get_forecast"]
    assert cards[0].source_path == str(tmp_path / "geo" / ".well-known" / "agent-card.json")


def test_ids_with_spaces_and_unicode_build_and_are_found(tmp_path):
    # v1.0 cards without interfaces fall back to the name: "Travel Agent" must build (it used to fail)
    cards = [
        {"name": "Travel Agent", "description": "books flights and hotels"},
        {"id": "Agent météo ☀", "name": "Weather", "description": "weather forecast by zip code"},
        {"id": " leading and trailing ", "description": "flights to Lisbon"},
    ]
    src = tmp_path / "cards.jsonl"
    src.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cards), encoding="utf-8")
    build_registry(src, tmp_path / "reg")
    reg = Registry.open(tmp_path / "reg")
    pool = reg.discover("flights", 5)
    expected = Registry.from_cards(read_cards(src)).discover("flights", 5)
    assert pool.ids == expected.ids == [" leading and trailing ", "Travel Agent"]  # a tie: id order
    assert pool.scores == expected.scores
    assert reg.card("Agent météo ☀").original() == cards[1]
    assert reg.discover("zip code", 5).ids == ["Agent météo ☀"]


def test_trec_runs_still_refuse_whitespace_ids(tmp_path):
    from ssr_engine.eval.trec import write_run

    with pytest.raises(ValueError, match="'Travel Agent' is empty or contains whitespace: it cannot go in a TREC run"):
        write_run(tmp_path / "run.txt", [("q1", ["Travel Agent"], [1.0])])
    assert not (tmp_path / "run.txt").exists()


def test_duplicates_name_the_users_file_both_positions_and_keep_last(tmp_path, capsys):
    src = tmp_path / "cards.jsonl"
    src.write_text(json.dumps({"name": "A", "description": "alpha one"}) + "\n"
                   + json.dumps({"name": "B", "description": "beta"}) + "\n"
                   + json.dumps({"name": "A", "description": "alpha two"}) + "\n")
    assert main(["agents", "build", "--cards", str(src), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"{src}:3: duplicate card id 'A'; first at {src}:1" in err
    assert ".agents-" not in err and "documents.jsonl" not in err  # never an internal file
    assert not (tmp_path / "r").exists()
    assert main(["agents", "build", "--cards", str(src), "--out", str(tmp_path / "r"),
                 "--on-duplicate", "keep-last"]) == 0
    assert Registry.open(tmp_path / "r").card("A").description == "alpha two"


def test_zip_code_weather_matches_the_tool_by_its_parameters(tmp_path):
    build_registry(_tools(tmp_path, "envelope"), tmp_path / "reg")
    reg = Registry.open(tmp_path / "reg")
    pool = reg.discover("zip code weather", 5)
    assert pool.ids[0] == "get_weather" and pool.matches[0] == 4
    assert {s for s, _ in reg.explain("zip code weather", "get_weather")} == {"zip", "code", "zip code", "weather"}


def test_card_store_returns_cards_verbatim(tmp_path):
    build_registry(DATA, tmp_path / "reg")
    reg = Registry.open(tmp_path / "reg")
    for card in iter_cards(DATA):
        stored = reg.card(card.id)
        assert stored.raw == card.raw and stored.original() == card.original()


def test_surrogate_id_is_a_clear_error(tmp_path):
    src = tmp_path / "cards.jsonl"
    src.write_text('{"id": "\\ud800", "name": "x"}\n')
    with pytest.raises(SsrError, match=r"cards.jsonl:1: .*not valid Unicode"):
        read_cards(src)


# -- an MCP registry's server lists (the official registry's `GET /v0/servers` answers, and a seed file) --
# The fixtures follow the shapes of modelcontextprotocol/registry: the current answer ({"servers": [{"server":
# server.json, "_meta": ...}], "metadata"}), the first one ({"servers": [server.json with id, version_detail]})
# and its seed file (a plain array of server.json, one entry per version).
MCP_REGISTRY = DATA.parent / "mcp-registry"  # not in DATA: the seed's repeated names are refused there
SERVERS = MCP_REGISTRY / "mcp-registry-servers.json"
SERVERS_V0 = MCP_REGISTRY / "mcp-registry-servers-v0.json"
SEED = MCP_REGISTRY / "mcp-registry-seed.json"


def test_mcp_registry_server_lists_are_cards_named_by_server_name():
    cards = read_cards(SERVERS)
    # the version the registry marks as not the latest is left out; ids are the registry's unique names
    assert [c.id for c in cards] == ["io.github.example/weather-server", "com.example/pdf-tools"]
    weather, pdf = cards
    assert weather.source == f"{SERVERS}:15" and pdf.source == f"{SERVERS}:30"  # the line of each entry
    assert pdf.title == "PDF tools" and "extract text from PDF" in pdf.description
    stored = json.loads(weather.raw)  # the server.json as published, packages included; not the _meta wrapper
    assert stored["version"] == "0.3.1" and stored["packages"][0]["identifier"] == "@example/weather-server"
    old = read_cards(SERVERS_V0)  # the first answers: their per-version UUID is not the id, the name is
    assert [c.id for c in old] == ["io.github.example/weather-server", "io.github.example/pdf-tools"]
    assert json.loads(old[0].raw)["id"] == "0f6c3c52-1b1e-4d8e-9a51-3f0e2b7c9a10"


def test_mcp_registry_seed_array_names_versions_alike_and_keep_last_takes_the_newest():
    with pytest.raises(InputError, match="calendar-mcp"):
        read_cards(SEED)  # two versions of one server: the same id, told with both places
    cards = read_cards(SEED, on_duplicate="keep-last")
    assert [c.id for c in cards] == ["io.github.example/calendar-mcp", "io.github.example/time-now"]
    assert json.loads(cards[0].raw)["version"] == "2.1.0"


SEED_V0 = MCP_REGISTRY / "mcp-registry-seed-v0.json"  # the first seed file: a UUID per version, version_detail
SERVER = MCP_REGISTRY / "server.json"  # one server.json, as a publisher writes it


def test_mcp_registry_seed_of_the_first_answers_and_a_lone_server_json_are_named_by_server_name(tmp_path):
    cards = read_cards(SEED_V0)  # the version marked not latest is left out, so no repeated name
    assert [c.id for c in cards] == ["io.github.example/ticket-desk", "io.github.example/unit-convert"]
    assert [c.source for c in cards] == [f"{SEED_V0}:2", f"{SEED_V0}:17"]
    assert "volumes" in cards[1].description and json.loads(cards[1].raw)["version_detail"]["version"] == "1.0.0"
    (lone,) = read_cards(SERVER)
    assert (lone.id, lone.title, lone.source) == ("io.github.example/status-page", "Status page", f"{SERVER}:1")
    # an entry that is not a card is told by the user's file and the line where it starts
    bad = tmp_path / "seed.json"
    bad.write_text(SEED_V0.read_text().replace('"description": "Convert lengths, weights, volumes',
                                               '"description": ["Convert lengths, weights, volumes'
                                               ).replace('between units.",\n    "version_detail": {"version": '
                                                         '"1.0.0"', 'between units."],\n    "version_detail": '
                                                         '{"version": "1.0.0"'))
    with pytest.raises(InputError, match=rf"^{bad}:17: "):
        read_cards(bad)


def test_a_smithery_like_server_list_is_named_by_qualified_name_and_stored_as_published():
    listed = MCP_REGISTRY / "smithery-servers.json"
    cards = read_cards(listed)
    assert [(c.id, c.title, c.source) for c in cards] == [("@example/web-search", "Web Search", f"{listed}:3"),
                                                          ("@example/sql-runner", "SQL Runner", f"{listed}:12")]
    assert "Postgres" in cards[1].description
    assert json.loads(cards[0].raw) == json.load(listed.open())["servers"][0]  # no name or title added


def test_a_registry_of_mcp_servers_is_built_served_and_found(tmp_path):
    build_registry(read_cards(SERVERS) + read_cards(SEED, on_duplicate="keep-last"), tmp_path / "reg")
    reg = Registry.open(tmp_path / "reg")
    assert reg.discover("weather forecast for a city", 3).ids[0] == "io.github.example/weather-server"
    assert reg.discover("merge pdf files", 3).ids[0] == "com.example/pdf-tools"
    assert reg.discover("move calendar events", 3).ids[0] == "io.github.example/calendar-mcp"
    card = reg.card("com.example/pdf-tools")  # read back from the card store: the same id and text
    assert card.id == "com.example/pdf-tools" and json.loads(card.raw)["remotes"][0]["url"].endswith("/mcp")


def test_a_smithery_like_server_detail_is_one_card_holding_its_tools(tmp_path):
    # a server's detail (its tools listed) is one card named by `qualifiedName`, not one card per tool
    # named by the tools' generic names ("convert" would collide across servers)
    detail = MCP_REGISTRY / "smithery-server-detail.json"
    (card,) = read_cards(detail)
    assert (card.id, card.title, card.source) == ("@example/unit-converter", "Unit Converter", f"{detail}:1")
    assert [t.name for t in card.tools] == ["convert", "list_units"]
    assert "miles to kilometres" in " ".join(capability_values(card))  # the tools' text is indexed
    assert json.loads(card.raw) == json.loads(detail.read_text())  # stored as published
    # two servers' details side by side: two cards, their tools found through their servers
    other = json.loads(detail.read_text()) | {"qualifiedName": "@example/thermo", "displayName": "Thermo",
                                              "description": "Temperatures.", "tools": [
                                                  {"name": "convert", "description": "Celsius to Fahrenheit.",
                                                   "inputSchema": {"type": "object"}}]}
    both = tmp_path / "both.json"
    both.write_text(json.dumps([json.loads(detail.read_text()), other], indent=1))
    build_registry(read_cards(both), tmp_path / "reg")
    reg = Registry.open(tmp_path / "reg")
    assert reg.discover("convert celsius to fahrenheit", 2).ids[0] == "@example/thermo"
    assert reg.discover("kilometres", 2).ids == ["@example/unit-converter"]


def test_a_markdown_awesome_list_is_refused_naming_file_and_line(tmp_path):
    listed = MCP_REGISTRY / "awesome-list.md"
    with pytest.raises(InputError, match=rf"^{listed}:7: Markdown \(an awesome-list\?\), not cards"):
        read_cards(listed)
    for suffix in (".json", ".jsonl"):  # the same text under a card file's name: the same refusal
        copy = tmp_path / f"servers{suffix}"
        copy.write_text(listed.read_text())
        with pytest.raises(InputError, match=rf"^{copy}:7: Markdown"):
            read_cards(copy)
    assert main(["agents", "build", "--cards", str(listed), "--out", str(tmp_path / "reg")]) == 2
    assert not (tmp_path / "reg").exists()  # nothing half-written


def test_server_json_files_as_publishers_write_them_in_a_folder(tmp_path):
    # the shapes found in the MCP registry repository's data/ folder: $schema a bare URL, a relative path, a
    # dated schema (2025-12-11: camelCase packages, remotes), or none at all (snake_case packages)
    shapes = {
        "a/server.json": {"$schema": "https://registry.modelcontextprotocol.io/schema/server.json",
                          "name": "io.example/rules", "description": "Evaluate decision tables",
                          "repository": {"type": "git", "url": "https://example.com/rules"},
                          "remotes": [{"type": "sse", "url": "https://rules.example.com/mcp"}], "version": "1.0.0"},
        "b.json": {"$schema": "../schema.json", "name": "voice", "description": "Voice execution for telephony",
                   "repository": "https://example.com/voice", "vendor": "Example"},
        "c/server.json": {"name": "io.example/guard", "description": "Exactly-once execution guard",
                          "packages": [{"registry_type": "pypi", "identifier": "guard", "version": "0.1"}]},
        "d.json": {"$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
                   "name": "io.example/observe", "title": "Observe", "description": "Logging for agents",
                   "version": "1.5.0", "packages": [{"registryType": "pypi", "identifier": "observe",
                                                     "transport": {"type": "stdio"}}]},
    }
    for name, server in shapes.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(json.dumps(server, indent=2))
    cards = {c.id: c for c in iter_cards(tmp_path)}
    assert sorted(cards) == ["io.example/guard", "io.example/observe", "io.example/rules", "voice"]
    assert cards["io.example/observe"].title == "Observe"
    assert json.loads(cards["io.example/rules"].raw)["remotes"][0]["url"] == "https://rules.example.com/mcp"
    assert json.loads(cards["io.example/guard"].raw)["packages"][0]["registry_type"] == "pypi"
    assert "telephony" in capability_values(cards["voice"])[1]
    bad = tmp_path / "a" / "server.json"
    bad.write_text(json.dumps({**shapes["a/server.json"], "description": 5}, indent=2))
    with pytest.raises(InputError, match=rf"^{bad}:1: .*'description' must be a string"):
        read_cards(bad)


def test_packages_and_remotes_are_indexed_in_every_spelling(tmp_path):
    # what a server needs and where it lives is searchable: package identifiers, remote urls, the names and
    # descriptions of environment variables, arguments and headers (camelCase 2025-09 on, snake_case 2025-07)
    (weather, pdf) = read_cards(SERVERS)
    assert weather.packages[0].identifier == "@example/weather-server"
    assert [(p.name, p.description) for p in weather.packages[0].settings] == \
        [("WEATHER_API_KEY", "Key of the weather service")]
    assert pdf.packages[0].identifier == "https://pdf.example.com/mcp"
    snake = {"name": "io.example/tickets", "description": "Open and close support tickets.",
             "packages": [{"registry_type": "pypi", "identifier": "zendesk-bridge",
                           "environment_variables": [{"name": "DESK_TOKEN", "description": "an oauth bearer"}],
                           "package_arguments": [{"type": "named", "name": "--region", "description": "datacenter"}],
                           "runtime_arguments": [{"type": "positional", "value_hint": "workspace_folder"}]}],
             "remotes": [{"type": "sse", "url": "https://desk.example.org/sse",
                          "headers": [{"name": "X-Tenant", "description": "tenant slug"}]}]}
    old = {"name": "io.example/old", "description": "The first answers' package shape.",
           "packages": [{"registry_name": "npm", "name": "@legacy/kanban-board", "version": "1.0"}],
           "remotes": [{"transport_type": "sse", "url": "https://old.example.net/sse"}, "not an object"]}
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"servers": [snake, old]}))
    build_registry(read_cards(SERVERS) + read_cards(path), tmp_path / "reg")
    reg = Registry.open(tmp_path / "reg")
    for query, expected in [("zendesk", "io.example/tickets"), ("oauth bearer", "io.example/tickets"),
                            ("datacenter", "io.example/tickets"), ("workspace folder", "io.example/tickets"),
                            ("tenant slug", "io.example/tickets"), ("desk example org", "io.example/tickets"),
                            ("kanban board", "io.example/old"), ("old example net", "io.example/old"),
                            ("weather api key", "io.github.example/weather-server")]:
        assert reg.discover(query, 1).ids == [expected], query
    # read back from the card store: the same packages (a merge re-adds a card from its stored text)
    assert reg.card("io.example/tickets").packages == read_cards(path)[0].packages
    # a card made in code writes its packages so that they read back equal
    card = dataclasses.replace(read_cards(path)[0], raw=None)
    assert parse_card(card.to_dict(), "x").packages == card.packages


def test_a_registry_answer_for_one_version_and_its_answers_of_2025_07_to_09(tmp_path):
    # `GET /v0/servers/{name}/versions/latest`: one server wrapped with the registry's _meta, one card
    one = tmp_path / "latest.json"
    one.write_text(json.dumps({"server": {"name": "io.example/maps", "description": "Geocode addresses.",
                                          "version": "2.0.0"},
                               "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active",
                                                                                       "isLatest": True}}}))
    (card,) = read_cards(one)
    assert (card.id, card.source) == ("io.example/maps", f"{one}:1") and json.loads(card.raw)["version"] == "2.0.0"
    # the answers of 2025-07 to 2025-09: each server carries the registry's _meta itself, snake_case; every
    # version listed, the older marked is_latest false (else two cards of one name: a duplicate id)
    def server(version, latest):
        return {"name": "io.example/maps", "description": f"Geocode addresses ({version}).", "version": version,
                "_meta": {"io.modelcontextprotocol.registry/official": {"id": version, "is_latest": latest}}}
    mid = tmp_path / "mid.json"
    mid.write_text(json.dumps({"servers": [server("1.0.0", False), server("2.0.0", True)],
                               "metadata": {"next_cursor": None, "count": 2}}, indent=1))
    (card,) = read_cards(mid)
    assert "(2.0.0)" in card.description
    # a version the registry marks deleted is no card
    gone = {"server": {"name": "io.example/gone", "description": "Removed.", "version": "1.0.0"},
            "_meta": {"io.modelcontextprotocol.registry/official": {"status": "deleted", "isLatest": True}}}
    listed = tmp_path / "listed.json"
    listed.write_text(json.dumps({"servers": [json.loads(one.read_text()), gone]}))
    assert [c.id for c in read_cards(listed)] == ["io.example/maps"]
    assert main(["agents", "build", "--cards", str(listed), "--out", str(tmp_path / "reg")]) == 0

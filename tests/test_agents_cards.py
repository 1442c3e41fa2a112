"""Agent Cards: parsing (good, unknown keys, wrong types, duplicate ids), capability text, writers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssr_engine import card_signals
from ssr_engine.agents.cards import AgentCard, Skill, Tool, capability_values, card_document, parse_card
from ssr_engine.agents.sources import iter_cards, read_cards, write_cards, write_documents
from ssr_engine.errors import InputError

FULL = {
    "id": "weather-1",
    "url": "https://example.com/weather",
    "name": "Weather Agent",
    "description": "Forecasts by zip code.",
    "tags": ["weather", "forecast"],
    "examples": ["will it rain tomorrow in 10001"],
    "skills": [
        {
            "id": "fc",
            "name": "Hourly forecast",
            "description": "Hourly temperature and rain.",
            "tags": ["hourly"],
            "examples": ["rain at 5pm?"],
        }
    ],
    "tools": [{"name": "get_forecast", "description": "Fetch the forecast for a zip code."}],
}


def _jsonl(tmp_path, rows, name="cards.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_full_card_is_parsed(tmp_path):
    [card] = read_cards(_jsonl(tmp_path, [FULL]))
    assert card.id == "weather-1"
    assert card.url == "https://example.com/weather"
    assert card.name == "Weather Agent"
    assert card.tags == ("weather", "forecast")
    skill = Skill("fc", "Hourly forecast", "Hourly temperature and rain.", ("hourly",), ("rain at 5pm?",))
    assert card.skills == (skill,)
    assert card.tools == (Tool("get_forecast", "Fetch the forecast for a zip code."),)
    assert card.source == f"{tmp_path / 'cards.jsonl'}:1"


def test_capability_values_are_the_structural_fields_one_value_each():
    card = parse_card(FULL, "x.json")
    assert capability_values(card) == [
        "Weather Agent", "Forecasts by zip code.", "weather", "forecast", "will it rain tomorrow in 10001",
        "Hourly forecast", "Hourly temperature and rain.", "hourly", "rain at 5pm?",
        "get_forecast", "Fetch the forecast for a zip code.",
    ]  # no id, url or skill id
    sigs = card_signals(capability_values(card))
    assert "weather agent" in sigs and "agent forecasts" not in sigs  # bigrams stay inside one value
    assert "example" not in sigs and "fc" not in sigs


def test_unknown_keys_are_ignored(tmp_path):
    extra = dict(FULL, version="1.0", capabilities={"streaming": True}, provider={"organization": "x"})
    extra["skills"] = [dict(FULL["skills"][0], securityRequirements=[{"x": 1}], futureField=7)]
    a, b = read_cards(_jsonl(tmp_path, [FULL, dict(extra, id="weather-2")]))
    assert b == AgentCard(**{**a.__dict__, "id": "weather-2"})


def test_folder_of_json_files_single_cards_and_lists(tmp_path):
    (tmp_path / "b.json").write_text(json.dumps([{"name": "B1"}, {"name": "B2", "description": "two"}]))
    (tmp_path / "a.json").write_text(json.dumps({"url": "https://a.example", "name": "A"}))
    (tmp_path / "notes.txt").write_text("not a card")
    cards = read_cards(tmp_path)
    assert [c.id for c in cards] == ["https://a.example", "B1", "B2"]
    assert cards[2].source == f"{tmp_path / 'b.json'}:1"  # the line where the card starts


def test_id_falls_back_to_url_then_name_and_integer_ids_are_text(tmp_path):
    cards = read_cards(_jsonl(tmp_path, [{"id": 7, "name": "n"}, {"url": "u", "name": "n2"}, {"name": "n3"}]))
    assert [c.id for c in cards] == ["7", "u", "n3"]


@pytest.mark.parametrize(
    "card, fragment",
    [
        ({"id": "c1", "name": 5}, "'name' must be a string, got int"),
        ({"id": "c1", "description": ["x"]}, "'description' must be a string"),
        ({"id": "c1", "tags": "weather"}, "'tags' must be a list of strings, got str"),
        ({"id": "c1", "examples": ["ok", 3]}, "examples[1] must be a string"),
        ({"id": "c1", "skills": {"name": "x"}}, "'skills' must be a list of objects"),
        ({"id": "c1", "skills": ["x"]}, "skills[0] must be an object"),
        ({"id": "c1", "skills": [{"name": "ok"}, {"tags": [1]}]}, "skills[1].tags[0] must be a string"),
        ({"id": "c1", "tools": [{"name": "t", "description": 1.5}]}, "tools[0].'description' must be a string"),
        ({"id": True, "name": "c1"}, "'id' must be a string or an integer"),
        ({"id": "c1", "url": 3}, "'url' must be a string"),
    ],
)
def test_wrong_types_name_file_line_and_card(tmp_path, card, fragment):
    path = _jsonl(tmp_path, [{"id": "ok", "name": "fine"}, card])
    with pytest.raises(InputError) as err:
        read_cards(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:2: card ")
    assert "'c1'" in msg
    assert fragment in msg
    assert err.value.line == 2


def test_card_without_any_identifier_or_not_an_object(tmp_path):
    with pytest.raises(InputError, match=r":1: card #1: no 'id', endpoint url or 'name'"):
        read_cards(_jsonl(tmp_path, [{"description": "anonymous"}]))
    # a line may hold a list of cards: here its first item is not one
    with pytest.raises(InputError, match=r":1: card #1: must be a JSON object, got int"):
        read_cards(_jsonl(tmp_path, ["[1, 2]"]))


def test_bad_json_and_bad_bytes_name_the_line(tmp_path):
    with pytest.raises(InputError, match=r"cards.jsonl:2: invalid JSON"):
        read_cards(_jsonl(tmp_path, [{"name": "a"}, "{oops"]))
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b'{"name": "a"}\n{"name": "\xff"}\n')
    with pytest.raises(InputError, match=r"bytes.jsonl:2: not UTF-8"):
        read_cards(path)
    bad = tmp_path / "dir"
    bad.mkdir()
    (bad / "x.json").write_text('{"name": ')
    with pytest.raises(InputError, match=r"x.json:1: invalid JSON"):
        read_cards(bad)


KEEP_LAST = "(--on-duplicate keep-last keeps the last)"


def test_duplicate_ids_name_both_places(tmp_path):
    path = _jsonl(tmp_path, [{"id": "a"}, {"id": "b"}, {"name": "zzz", "id": "a"}])
    with pytest.raises(InputError) as err:
        read_cards(path)
    assert str(err.value) == f"{path}:3: duplicate card id 'a'; first at {path}:1 {KEEP_LAST}"
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "one.json").write_text(json.dumps({"url": "u1", "name": "x"}))
    (folder / "two.json").write_text(json.dumps([{"name": "y"}, {"id": "u1"}], indent=1))
    with pytest.raises(InputError) as err:
        read_cards(folder)
    two, one = folder / "two.json", folder / "one.json"
    # the line where each card starts in a pretty-printed array
    assert str(err.value) == f"{two}:5: duplicate card id 'u1'; first at {one}:1 {KEEP_LAST}"
    kept = read_cards(folder, on_duplicate="keep-last")
    assert [c.id for c in kept] == ["u1", "y"] and kept[0].name == "" and kept[0].source == f"{two}:5"


def test_empty_or_missing_input_is_an_error(tmp_path):
    with pytest.raises(InputError, match="no cards"):
        read_cards(_jsonl(tmp_path, ["", "  "]))
    with pytest.raises(InputError, match="no such file"):
        list(iter_cards(tmp_path / "absent.jsonl"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no .json card files"):
        read_cards(empty)


def test_writers_stream_the_build_documents_and_round_trip_cards(tmp_path):
    cards = [parse_card(FULL, "x"), parse_card({"name": "Bare"}, "x")]
    assert write_documents(iter(cards), tmp_path / "docs.jsonl") == 2
    lines = [json.loads(x) for x in (tmp_path / "docs.jsonl").read_text().splitlines()]
    assert lines == [card_document(c) for c in cards]
    assert lines[1] == {"id": "Bare", "fields": ["Bare"]}
    write_cards(cards, tmp_path / "cards.jsonl")
    assert read_cards(tmp_path / "cards.jsonl") == cards
    assert not list(tmp_path.glob("*.tmp"))


_text = st.text(st.characters(codec="utf-8"), max_size=30)
_skill = st.builds(Skill, id=st.none() | _text.filter(bool), name=_text, description=_text,
                   tags=st.tuples(_text) | st.just(()), examples=st.lists(_text, max_size=2).map(tuple))
_card = st.builds(AgentCard, id=_text.filter(bool), name=_text, description=_text,
                  url=st.none() | _text, skills=st.lists(_skill, max_size=2).map(tuple),
                  tags=st.lists(_text, max_size=3).map(tuple), examples=st.lists(_text, max_size=2).map(tuple),
                  tools=st.lists(st.builds(Tool, name=_text, description=_text), max_size=2).map(tuple))


@settings(max_examples=60, deadline=None)
@given(_card)
def test_to_dict_round_trips_and_signals_are_card_signals_of_values(card):
    back = parse_card(json.loads(json.dumps(card.to_dict())), "mem")
    assert back == card
    assert card_signals(capability_values(back)) == card_signals(capability_values(card))
    # every non-empty structural value is kept, one entry each; ids and urls are not capability text
    assert len(capability_values(card)) == sum(
        1 for v in [card.name, card.description, *card.tags, *card.examples,
                    *(x for s in card.skills for x in (s.name, s.description, *s.tags, *s.examples)),
                    *(x for t in card.tools for x in (t.name, t.description))] if v
    )

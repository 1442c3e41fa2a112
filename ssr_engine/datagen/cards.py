"""A seeded generator of an SSR-AgentBench-like registry: Agent Cards across domains, and queries.

Card i is a function of (seed, i) alone, so a registry of 100,000 cards streams in bounded
memory and its first 1,000 cards are the 1,000-card registry. Each card belongs to a domain,
specialises in a few (verb, object, qualifier) capabilities of that domain, and has a brand
name, skills with tags and examples, and MCP-style tools. Cards of one domain share most of
their vocabulary, so retrieval has to use the specific combination.

A query is written for one gold card from one of its skills, in other words than the card's
examples: a request template, often a synonym for the verb, sometimes the qualifier dropped,
plus the user's situation (words that are on no card).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources

from ..agents.cards import AgentCard, Skill, Tool

# domain -> (objects, verbs, qualifiers): a data table, kept as data (domains.json)
DOMAINS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    name: (tuple(d["objects"]), tuple(d["verbs"]), tuple(d["qualifiers"]))
    for name, d in json.loads(resources.files(__package__).joinpath("domains.json").read_text("utf-8")).items()
}

# query-side rewording of verbs (so queries do not simply repeat the cards)
SYNONYMS: dict[str, tuple[str, ...]] = {
    "analyze": ("look into", "break down"), "book": ("reserve", "get me"), "compare": ("weigh up", "contrast"),
    "find": ("look for", "locate"), "track": ("keep an eye on", "follow"), "summarize": ("give me the gist of",
    "condense"), "schedule": ("set up", "arrange"), "write": ("compose", "come up with"), "draft": ("prepare",
    "put together"), "review": ("go over", "check over"), "explain": ("help me understand", "clarify"),
    "translate": ("convert the language of",), "plan": ("organize", "map out"), "generate": ("create", "make"),
    "monitor": ("watch", "keep track of"), "recommend": ("suggest",), "optimize": ("improve", "tune"),
}
SITUATIONS = (
    "my boss asked this morning", "it is quite urgent", "I have never done this before", "for tomorrow",
    "my friend recommended asking", "I am a bit lost", "before the deadline on friday", "please be quick",
    "I tried twice already", "this weekend", "for my side project", "my team needs it",
)
TEMPLATES = (
    "Can you {verb} {obj} {qual}?", "I need something to {verb} {obj} {qual}", "Help me {verb} {obj} {qual}, {sit}",
    "Is there an agent that can {verb} {obj} {qual}?", "{sit}: {verb} {obj} {qual}", "I want to {verb} {obj}; {sit}",
    "Which tool will {verb} {obj} {qual}?", "Looking for a way to {verb} {obj} {qual}",
)
ROLES = ("Assistant", "Agent", "Copilot", "Bot", "Helper", "Advisor", "Hub", "Pro")
SYLLABLES = ("zo", "ra", "vi", "ke", "lu", "ma", "tor", "qui", "nex", "sol", "fy", "dra", "pel", "ix", "ona",
             "bre", "cal", "dex", "gar", "hul", "jin", "kor", "lyn", "mur")
DOMAIN_NAMES = tuple(sorted(DOMAINS))


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    gold: str


def card_id(i: int) -> str:
    return f"agent-{i:06d}"


def _rng(seed: int, i: int, salt: str) -> random.Random:
    # str seeds are hashed with SHA-512 by `random`, stable across runs and platforms
    return random.Random(f"{seed}:{salt}:{i}")


def _capabilities(seed: int, i: int) -> tuple[str, str, list[tuple[str, str, str]]]:
    """Domain, brand and the (verb, object, qualifier) skills of card i."""
    r = _rng(seed, i, "card")
    domain = r.choice(DOMAIN_NAMES)
    objects, verbs, quals = DOMAINS[domain]
    brand = "".join(r.choice(SYLLABLES) for _ in range(r.randint(2, 3))).capitalize()
    focus = r.choice(objects)
    skills = []
    for j in range(r.randint(2, 4)):
        obj = focus if j == 0 else r.choice(objects)
        skills.append((r.choice(verbs), obj, r.choice(quals)))
    return domain, brand, skills


def make_card(seed: int, i: int) -> AgentCard:
    """Card i of the registry with this seed."""
    domain, brand, caps = _capabilities(seed, i)
    r = _rng(seed, i, "text")
    focus = caps[0][1]
    role = r.choice(ROLES)
    name = f"{brand} {focus.title()} {role}"
    skills = []
    for j, (verb, obj, qual) in enumerate(caps):
        skills.append(
            Skill(
                id=f"{card_id(i)}-s{j + 1}",
                name=f"{verb.capitalize()} {obj}",
                description=f"{verb.capitalize()}s {obj} {qual} using {brand}'s {domain} models.",
                tags=(domain, obj, verb),
                examples=(f"{verb} my {obj} {qual}", f"please {verb} these {obj}"),
            )
        )
    tools = tuple(
        Tool(name=f"{verb.replace(' ', '_')}_{obj.replace(' ', '_')}", description=f"{verb.capitalize()} {obj} {qual}.")
        for verb, obj, qual in caps[: r.randint(0, len(caps))]
    )
    return AgentCard(
        id=card_id(i),
        name=name,
        description=f"{brand} helps people with {domain}: {', '.join(sorted({o for _, o, _ in caps}))}.",
        url=f"https://agents.example.com/{brand.lower()}-{i}",
        skills=tuple(skills),
        tags=(domain, focus),
        examples=(f"{caps[0][0]} {focus} {caps[0][2]}",),
        tools=tools,
        source_path="synthetic",
        source_line=i + 1,
    )


def iter_registry(n_cards: int, seed: int = 0) -> Iterator[AgentCard]:
    """Cards 0..n_cards-1, streamed."""
    for i in range(n_cards):
        yield make_card(seed, i)


def make_query(seed: int, i: int, q: int) -> Query:
    """Query number q, written for card i."""
    _, _, caps = _capabilities(seed, i)
    r = _rng(seed, q, "query")
    verb, obj, qual = r.choice(caps)
    if verb in SYNONYMS and r.random() < 0.6:
        verb = r.choice(SYNONYMS[verb])
    if r.random() < 0.3:
        qual = ""
    text = r.choice(TEMPLATES).format(verb=verb, obj=obj, qual=qual, sit=r.choice(SITUATIONS))
    return Query(f"q{q:06d}", " ".join(text.replace(" ?", "?").replace(" ,", ",").split()), card_id(i))


def make_queries(n_cards: int, n_queries: int, seed: int = 0) -> list[Query]:
    """n_queries queries over a registry of n_cards, gold cards drawn without replacement when possible."""
    r = _rng(seed, n_cards, "gold")
    if n_queries <= n_cards:
        golds = r.sample(range(n_cards), n_queries)
    else:
        golds = [r.randrange(n_cards) for _ in range(n_queries)]
    return [make_query(seed, g, q) for q, g in enumerate(golds)]

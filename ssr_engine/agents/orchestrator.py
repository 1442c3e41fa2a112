"""The orchestrator interface: number the pool in a prompt, ask a provider, parse and validate.

Every query ends in exactly one outcome (DESIGN.md section 6), decided in this order:

    empty_pool      the pool is empty; the provider is not called
    retrieval_miss  evaluation only: the gold card is not in the pool; the provider is not called
                    (no answer could be right, so none is paid for)
    api_failure     the provider raised ProviderError (HTTP error, timeout, malformed response);
                    the error message is kept
    invalid_index   the answer holds no integer, or one outside 1..n
    selected        a valid 1-based index; `Outcome.card_id` is the chosen card

Input size: the prompt is measured in characters and in estimated tokens, `ceil(chars / 4)`
(the usual rule of thumb for English text with BPE tokenizers; no tokenizer is needed).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .cards import AgentCard, Param, clean_text
from .providers import Provider, ProviderError, ProviderRequest

STATUSES = ("selected", "empty_pool", "retrieval_miss", "api_failure", "invalid_index")

# Card text in the prompt is escaped and bounded per card, so that no card can forge prompt lines
# or crowd out the others: every value goes through `clean_text` (newlines and other whitespace
# runs become one space; control and format characters such as bidi overrides are dropped), each
# field is cut to its limit below, at most MAX_ITEMS skills and MAX_ITEMS tools are listed (then
# "(+N more)"), and a card's whole entry is cut to CARD_CHARS characters.
NAME_CHARS = 100
DESCRIPTION_CHARS = 300
SKILL_DESCRIPTION_CHARS = 160
MAX_ITEMS = 8
MAX_PARAMS = 8
CARD_CHARS = 1500
QUERY_CHARS = 2000

PROMPT_HEADER = (
    "You are an orchestrator. Choose the one agent best suited to the user's request.\n"
    "Agents:\n"
)
PROMPT_FOOTER = "\nUser request: {query}\nAnswer with the number of the chosen agent only (1-{n})."


def _short(text: str, limit: int) -> str:
    text = clean_text(text)
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _params(params: Sequence[Param]) -> str:
    names = [_short(p.name, 40) for p in params[:MAX_PARAMS]]
    if len(params) > MAX_PARAMS:
        names.append("...")
    return f"({', '.join(names)})" if params else ""


def render_card(card: AgentCard) -> str:
    """One card's listing entry without its number: name, description, skills, tools (bounded, one value per line)."""
    head = _short(card.label, NAME_CHARS)
    desc = _short(card.description, DESCRIPTION_CHARS)
    lines = [f"{head}{_params(card.params)}" + (f": {desc}" if desc else "")]
    for s in card.skills[:MAX_ITEMS]:
        sdesc = _short(s.description, SKILL_DESCRIPTION_CHARS)
        tags = f" [{_short(', '.join(s.tags[:MAX_PARAMS]), 80)}]" if s.tags else ""
        sname = _short(s.name or s.id or "skill", NAME_CHARS)
        lines.append(f"   - skill {sname}{tags}" + (f": {sdesc}" if sdesc else ""))
    if len(card.skills) > MAX_ITEMS:
        lines.append(f"   (+{len(card.skills) - MAX_ITEMS} more skills)")
    for t in card.tools[:MAX_ITEMS]:
        tdesc = _short(t.description, SKILL_DESCRIPTION_CHARS)
        lines.append(f"   - tool {_short(t.title or t.name or 'tool', NAME_CHARS)}{_params(t.params)}"
                     + (f": {tdesc}" if tdesc else ""))
    if len(card.tools) > MAX_ITEMS:
        lines.append(f"   (+{len(card.tools) - MAX_ITEMS} more tools)")
    text = "\n".join(lines)
    if len(text) > CARD_CHARS:
        text = text[: CARD_CHARS - 3].rstrip() + "..."
    return text


class PromptBuilder:
    """Builds prompts; caches each card's rendering, since the same cards recur across queries."""

    def __init__(self) -> None:
        self._cache: dict[str, str] = {}

    def rendered(self, card: AgentCard) -> str:
        text = self._cache.get(card.id)
        if text is None:
            text = self._cache[card.id] = render_card(card)
        return text

    def listing(self, cards: Sequence[AgentCard]) -> str:
        return "".join(f"{i}. {self.rendered(c)}\n" for i, c in enumerate(cards, 1))

    def prompt(self, query: str, cards: Sequence[AgentCard], listing: str | None = None) -> str:
        """The full prompt; pass a precomputed `listing` of `cards` to reuse it across queries."""
        if listing is None:
            listing = self.listing(cards)
        return PROMPT_HEADER + listing + PROMPT_FOOTER.format(query=_short(query, QUERY_CHARS), n=len(cards))


def build_prompt(query: str, cards: Sequence[AgentCard]) -> str:
    """The prompt listing `cards` numbered 1..n (name, description, skills) and the request."""
    return PromptBuilder().prompt(query, cards)


# ---- parsing ---------------------------------------------------------------------------------

_INT = re.compile(r"(?<![\w.])-?\d+(?![\w.]*\d)")
_ANSWER_KEYS = ("index", "choice", "agent", "selected", "selection", "answer", "number", "id")


def parse_choice(text: str) -> int | None:
    """The integer the answer names, or None.

    JSON answers: an integer, a numeric string, or an object with one of the keys index,
    choice, agent, selected, selection, answer, number, id. Plain text: the first standalone
    integer ("3", "Agent 3", "I pick #3."); decimals such as "2.5" are not integers.
    """
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        value: Any = json.loads(stripped)
    except (ValueError, RecursionError):  # ValueError: not JSON, or an integer beyond int()'s digit limit
        value = None
    else:
        found = _from_json(value)
        if found is not None:
            return found
    m = _INT.search(stripped)
    return _int(m.group()) if m else None


def _int(digits: str) -> int | None:
    """int(digits), or None when it has more digits than any pool size could (Python refuses
    to convert more than 4,300 digits; an answer of that size is no valid index anyway)."""
    return int(digits) if len(digits.lstrip("-")) <= 18 else None


def _from_json(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        m = _INT.fullmatch(value.strip())
        return _int(m.group()) if m else None
    if isinstance(value, dict):
        lowered = {str(k).lower(): v for k, v in value.items()}
        for key in _ANSWER_KEYS:
            if key in lowered:
                return _from_json(lowered[key])
    if isinstance(value, list) and len(value) == 1:
        return _from_json(value[0])
    return None


# ---- outcomes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """How one query ended. `index` is the parsed 1-based answer (when there was one)."""

    status: str
    pool_size: int
    card_id: str | None = None
    index: int | None = None
    answer: str | None = None
    error: str | None = None
    gold: str | None = None
    prompt_chars: int = 0

    @property
    def correct(self) -> bool:
        """Selected the gold card (evaluation)."""
        return self.status == "selected" and self.gold is not None and self.card_id == self.gold


def orchestrate(
    query: str,
    cards: Sequence[AgentCard],
    provider: Provider,
    gold: str | None = None,
    prompts: PromptBuilder | None = None,
) -> Outcome:
    """Run one query against a pool (`cards`, ranked): exactly one outcome, see the module doc."""
    n = len(cards)
    if n == 0:
        return Outcome("empty_pool", 0, gold=gold)
    ids = [c.id for c in cards]
    if gold is not None and gold not in ids:
        return Outcome("retrieval_miss", n, gold=gold)
    prompt = (prompts or PromptBuilder()).prompt(query, cards)
    try:
        answer = provider.complete(ProviderRequest(prompt, ids, gold))
    except ProviderError as exc:
        return Outcome("api_failure", n, error=str(exc), gold=gold, prompt_chars=len(prompt))
    index = parse_choice(answer)
    if index is None or not 1 <= index <= n:
        return Outcome("invalid_index", n, index=index, answer=answer, gold=gold, prompt_chars=len(prompt))
    return Outcome("selected", n, card_id=ids[index - 1], index=index, answer=answer, gold=gold,
                   prompt_chars=len(prompt))


def outcome_counts(outcomes: Iterable[Outcome | str]) -> dict[str, int]:
    """Count outcomes by status (every status present, zeros included); unknown statuses raise."""
    counts: Counter[str] = Counter()
    for o in outcomes:
        status = o if isinstance(o, str) else o.status
        if status not in STATUSES:
            raise ValueError(f"unknown outcome status {status!r} (known: {', '.join(STATUSES)})")
        counts[status] += 1
    return {s: counts[s] for s in STATUSES}


# ---- input size ------------------------------------------------------------------------------


def estimate_tokens(text_or_chars: str | int) -> int:
    """Estimated tokens: ceil(chars / 4)."""
    chars = text_or_chars if isinstance(text_or_chars, int) else len(text_or_chars)
    return math.ceil(chars / 4)


@dataclass(frozen=True)
class InputSize:
    full_chars: int
    pool_chars: int

    @property
    def full_tokens(self) -> int:
        return estimate_tokens(self.full_chars)

    @property
    def pool_tokens(self) -> int:
        return estimate_tokens(self.pool_chars)

    @property
    def reduction_pct(self) -> float:
        """Input saved by sending the pool instead of the registry, in percent of characters."""
        return 100.0 * (1.0 - self.pool_chars / self.full_chars) if self.full_chars else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "full_chars": self.full_chars,
            "pool_chars": self.pool_chars,
            "full_tokens": self.full_tokens,
            "pool_tokens": self.pool_tokens,
            "reduction_pct": round(self.reduction_pct, 3),
        }


def input_size(query: str, registry: Sequence[AgentCard], pool: Sequence[AgentCard]) -> InputSize:
    """The prompt with the whole registry against the prompt with the pool, for one query."""
    b = PromptBuilder()
    return InputSize(len(b.prompt(query, registry)), len(b.prompt(query, pool)))

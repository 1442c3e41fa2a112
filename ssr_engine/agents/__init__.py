"""Agent discovery (DESIGN.md section 6): Agent Cards, SSR preselection, the orchestrator interface.

Modules, one job each: `cards` (read, validate, write cards), `sources` (where cards come from and
go to), `discovery` (the pool for a query, the card store), `live` (a registry that takes writes;
`view` one commit of it, `merges` its segment merges, `warm` its warm-up), `server` and `asgi` (HTTP
and MCP), `orchestrator` (prompt, answer parsing, outcomes, input-size accounting), `providers` (who
answers), `bench` (the benchmark report). Synthetic registries: `datagen.cards`.
"""

from __future__ import annotations

from .cards import AgentCard, capability_values
from .discovery import Pool, Registry, build_registry, discover
from .orchestrator import STATUSES, Outcome, orchestrate, outcome_counts
from .sources import read_cards

__all__ = [
    "AgentCard",
    "Pool",
    "Registry",
    "build_registry",
    "discover",
    "STATUSES",
    "Outcome",
    "capability_values",
    "orchestrate",
    "outcome_counts",
    "read_cards",
]

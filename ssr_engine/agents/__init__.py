"""Agent discovery (DESIGN.md section 6): Agent Cards, SSR preselection, the orchestrator interface.

Modules, one job each: `cards` (read, validate, write cards), `discovery` (the pool for a query),
`orchestrator` (prompt, answer parsing, outcomes, input-size accounting), `providers` (who answers),
`synthetic_cards` (a seeded registry generator), `bench` (the benchmark report).
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

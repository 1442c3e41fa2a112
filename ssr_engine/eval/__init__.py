"""Evaluation (layer 3): `evaluate` (a method over an index, queries and qrels -> TREC run and JSON
report), `trec` (query, qrels and run files), `metrics` (trec_eval's definitions), `compare` (reports
side by side, paired tests), `stats` (the one percentile definition)."""

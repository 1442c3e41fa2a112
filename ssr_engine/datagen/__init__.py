"""Data generators (layer 3): `collection` (seeded, streaming MS MARCO-shaped passages, queries and
qrels; with `model`, `stream` and `queries`) and `cards` (a seeded Agent Card registry with
gold-labelled queries); `data_scripts/` and `ssr agents generate` wrap them."""

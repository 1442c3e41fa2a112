"""ssr_engine/eval."""

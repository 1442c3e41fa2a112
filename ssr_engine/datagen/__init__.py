"""ssr_engine/datagen."""

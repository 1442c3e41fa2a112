"""ssr_engine/kernels."""

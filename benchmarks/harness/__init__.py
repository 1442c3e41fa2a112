"""The side-by-side benchmark harness behind `benchmarks/run.py` (see benchmarks/README.md).

Modules: `measure` (subprocesses, process-tree RSS, sizes, machine), `engines` (the engine
table: how each one is built and served), `worker` (the subprocess that builds a peer's index
or serves queries), `tables` (JSON results to markdown), `plots` (PNG figures).
"""

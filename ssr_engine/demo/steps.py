"""Steps shared by the demo's parts: an index built once per input, trec_eval's view of a run."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import IndexFormatError
from ..version import __version__
from .workdir import WorkDir

Say = Callable[[str], None]


def index_key(input_key: Mapping[str, Any], scoring: str) -> dict[str, Any]:
    """What an index depends on: its input, its scoring, the package and format versions."""
    from ..format import FORMAT_VERSION

    return {"input": dict(input_key), "scoring": scoring, "ssr_engine": __version__, "format": FORMAT_VERSION}


def index_ready(work: WorkDir, step: str, key: Mapping[str, Any]) -> bool:
    """True when the ledger has `step` for `key` and the index opens (checked by the format module)."""
    from ..format import open_index

    if not work.fresh(step, dict(key)):
        return False
    try:
        open_index(work.file(step))
    except IndexFormatError:
        return False
    return True


def ensure_index(work: WorkDir, step: str, collection: Path, input_key: Mapping[str, Any], scoring: str,
                 say: Say, *, quiet: bool = True, measure: bool = False) -> tuple[Path, dict[str, Any]]:
    """The index of `collection` at work/step, built unless the ledger has it for this input.

    Returns its path and the build figures recorded when it was built (`seconds`; with
    `measure`, `peak_rss_bytes` of the build process, which then runs as a child process so that
    its peak is its own). `reused` says whether this call built it.
    """
    out = work.file(step)
    key = index_key(input_key, scoring)
    if index_ready(work, step, key):
        rec = work.record(step) or {}
        say(f"reusing the {scoring} index {out}")
        return out, {**rec.get("info", {}), "reused": True, "built": rec.get("date")}
    work.claim(step, [out])
    say(f"building the {scoring} index {out}")
    t0 = time.perf_counter()
    if measure:
        peak = _build_in_child(collection, out, scoring, quiet)
        info: dict[str, Any] = {"peak_rss_bytes": peak}
    else:
        from ..indexing import build_index

        build_index(collection, out, scoring=scoring, quiet=True)
        info = {}
    info["seconds"] = time.perf_counter() - t0
    work.done(step, key, [out], info)
    return out, {**info, "reused": False}


def _build_in_child(collection: Path, out: Path, scoring: str, quiet: bool) -> int | None:
    """`ssr build-index` in a child process; its peak RSS in bytes (None where wait4 is missing)."""
    cmd = [sys.executable, "-m", "ssr_engine", "build-index", "--collection", str(collection), "--out", str(out),
           "--scoring", scoring]
    if quiet:
        cmd.append("--quiet")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    if not hasattr(os, "wait4"):
        code, peak = proc.wait(), None
    else:
        _, status, usage = os.wait4(proc.pid, 0)
        code = proc.returncode = os.waitstatus_to_exitcode(status)
        # ru_maxrss: KiB on Linux, bytes on macOS
        peak = int(usage.ru_maxrss) * (1 if sys.platform == "darwin" else 1024)
    if code != 0:
        from ..errors import SsrError

        raise SsrError(f"building {out} failed (exit status {code}): {' '.join(cmd)}")
    return peak


TREC_NAMES = {"MRR@10": "RR@10", "R@10": "R@10", "R@20": "R@20", "R@100": "R@100", "R@1000": "R@1000",
              "nDCG@10": "nDCG@10"}  # our measure -> trec_eval's (through ir_measures)


def trec_eval_metrics(run_path: Path, qrels_path: Path, judged: list[str]) -> dict[str, float] | None:
    """trec_eval's measures (pytrec_eval through ir_measures) of the run file as written, read back
    from disk, averaged over `judged` (queries without a result add 0, as in our reports); None
    when ir_measures is not installed."""
    try:
        import ir_measures  # noqa: F401
    except ImportError:
        return None
    from ..eval.metrics import ExternalMeasures
    from ..eval.trec import read_qrels, read_run

    external = ExternalMeasures(list(TREC_NAMES.values()), read_qrels(qrels_path))
    for qid, ranking in read_run(run_path).items():
        external.add(qid, ranking.docids, ranking.scores)
    per_query = external.per_query(judged)
    n = max(1, len(judged))
    return {ours: math.fsum(per_query[theirs].values()) / n for ours, theirs in TREC_NAMES.items()}

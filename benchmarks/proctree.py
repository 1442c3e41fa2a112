"""Memory of a process tree, sampled from /proc (Linux): RSS and RssAnon summed over all
descendants, so that worker processes or threads of any kind are counted."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass, field


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _status_kib(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_memory(root: int) -> tuple[int, int]:
    """(RSS, RssAnon) in bytes of `root` and all its descendants."""
    tree = _children()
    todo, pids = [root], []
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(tree.get(pid, []))
    return (sum(_status_kib(p, "VmRSS") for p in pids) * 1024, sum(_status_kib(p, "RssAnon") for p in pids) * 1024)


@dataclass
class Measured:
    returncode: int
    seconds: float
    peak_rss: int
    peak_anon: int
    samples: list[tuple[float, int, int]] = field(default_factory=list)


def run_measured(cmd: list[str], interval: float = 0.1, **popen) -> Measured:
    """Run `cmd`, sampling the memory of its process tree every `interval` seconds."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, **popen)
    samples: list[tuple[float, int, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            rss, anon = tree_memory(proc.pid)
            samples.append((time.perf_counter() - start, rss, anon))
            done.wait(interval)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    proc.wait()
    seconds = time.perf_counter() - start
    done.set()
    t.join()
    return Measured(
        returncode=proc.returncode,
        seconds=seconds,
        peak_rss=max((s[1] for s in samples), default=0),
        peak_anon=max((s[2] for s in samples), default=0),
        samples=samples,
    )

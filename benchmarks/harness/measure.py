"""Measurements taken from outside a process: wall time, process-tree RSS, sizes on disk, machine."""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

MIB = 1 << 20


def tree_rss_bytes(pid: int) -> int:
    """Summed VmRSS of `pid` and all its descendants (psutil), 0 once the process is gone."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:  # exited between listing and reading
            pass
    return total


def run_tracked(cmd: list[str], log_path: Path, env: dict[str, str] | None = None, interval: float = 0.1,
                cwd: str | None = None, limit_bytes: int | None = None, timeout: float | None = None) -> dict:
    """Run `cmd` to completion, sampling the RSS of its whole process tree every `interval` seconds.

    Returns wall seconds, the peak of the summed tree RSS (sampled, so a spike shorter than the
    interval can be missed; file-backed pages of memory maps count too), the exit status and the
    tail of the log (stdout and stderr). The tree is killed when its RSS passes `limit_bytes` or
    the run passes `timeout` seconds; `killed` then says why.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    killed = None
    busy0, ours0 = busy_cpu_seconds(), children_cpu_seconds()
    with open(log_path, "wb") as log:
        t0 = time.perf_counter()
        # its own session, so that a kill reaches the children this run started, and nothing else
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        peak = 0
        while proc.poll() is None:
            rss = tree_rss_bytes(proc.pid)
            peak = max(peak, rss)
            if limit_bytes is not None and rss > limit_bytes:
                killed = f"killed: process tree RSS {rss / MIB:,.0f} MiB passed the {limit_bytes / MIB:,.0f} MiB limit"
            elif timeout is not None and time.perf_counter() - t0 > timeout:
                killed = f"killed: still running after the {timeout:,.0f} s timeout"
            if killed:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(interval)
        wall = time.perf_counter() - t0
    ours = children_cpu_seconds() - ours0
    # CPU the rest of the machine used meanwhile (other users' jobs on shared cores), in cores
    other = max(0.0, busy_cpu_seconds() - busy0 - ours) / wall if wall > 0 else 0.0
    return {"command": cmd, "wall_seconds": wall, "peak_rss_mib": peak / MIB, "returncode": proc.returncode,
            "killed": killed, "cpu_seconds": ours, "other_cpu_cores": other, "log": str(log_path),
            "log_tail": log_tail(log_path)}


@contextlib.contextmanager
def busy_neighbours(n: int) -> Iterator[None]:
    """Run the block beside `n` processes that each spin on one core (a busy neighbour's load).

    The issue's question: does an engine lose more than its peers when another job shares the
    machine? Each spinner is a plain busy loop at normal priority, killed when the block ends.
    """
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
             for _ in range(n)]
    try:
        time.sleep(0.2 if n else 0.0)  # let them reach the loop
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def busy_cpu_seconds() -> float:
    """Non-idle CPU seconds of the whole machine since boot (/proc/stat: all but idle and iowait)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's waited-for children (and theirs)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def log_tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    # progress bars rewrite one line with carriage returns: keep the last state of each line
    rows = [row.rsplit("\r", 1)[-1] for row in text.splitlines()]
    return "\n".join([row for row in rows if row.strip()][-lines:])[-2000:]


def dir_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes of every regular file under `path` (apparent size)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())


def machine() -> dict:
    """CPU model, logical cores and RAM, as `lscpu` and /proc/meminfo give them."""
    info: dict = {"platform": platform.platform(), "python": platform.python_version(), "cores": os.cpu_count()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Model name", "CPU(s)", "Thread(s) per core"):
                info[key.strip()] = value.strip()
    except OSError:
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["ram_gib"] = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return info


def seconds_per_call(call, min_seconds: float = 0.0) -> tuple[float, int]:
    """Wall seconds per call of `call()`, called back to back until `min_seconds` have passed (at least
    once), and the number of calls. A batch of 0.2 s is one sample of a garbage collection, a page-fault
    burst or a neighbour's spike; 2 s of calls average them, as the peers' longer batches do."""
    n = 0
    t0 = time.perf_counter()
    while True:
        call()
        n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_seconds:
            return elapsed / n, n


def repeated(configs: list[tuple], run, repeat: int, min_seconds: float = 0.0,
             calls: dict[tuple, list[int]] | None = None) -> dict[tuple, list[float]]:
    """Wall seconds per call of `run(*config)` for each config, `repeat` rounds over all the configs in turn.

    Rounds rather than back-to-back repeats: a slow spell of the machine then falls on several
    configurations, not on every repeat of one. Within a round, `seconds_per_call` with `min_seconds`;
    `calls`, when given, receives each round's count of calls. Report the median (`statistics.median`).
    """
    seconds: dict[tuple, list[float]] = {c: [] for c in configs}
    for _ in range(max(1, repeat)):
        for c in configs:
            s, n = seconds_per_call(lambda c=c: run(*c), min_seconds)
            seconds[c].append(s)
            if calls is not None:
                calls.setdefault(c, []).append(n)
    return seconds

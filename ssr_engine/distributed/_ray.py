"""Ray, the optional dependency (`pip install -e ".[distributed]"`): import, connection, build tasks."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import SsrError


def ray_module() -> Any:
    """The `ray` module, or an `SsrError` saying which extra installs it."""
    try:
        import ray
    except ImportError:
        raise SsrError("Ray is not installed: pip install 'ssr_engine[distributed]' (or use --no-ray)") from None
    return ray


def connect(address: str | None, num_cpus: int | None = None) -> Any:
    """Ray, connected: to the cluster at `address`, or to a local instance started here (`num_cpus`,
    default all cores) when none is running in this process. Returns the module."""
    ray = ray_module()
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if not address:  # a local instance runs this process's ssr_engine, wherever it was imported from
            here = str(Path(__file__).resolve().parents[2])
            path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
            kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
        try:
            if address:
                ray.init(address=address, **kwargs)
            else:
                ray.init(num_cpus=num_cpus or os.cpu_count() or 1, **kwargs)
        except Exception as exc:  # Ray raises a bare Exception when its own processes do not start
            raise SsrError(f"cannot start or reach Ray{f' at {address}' if address else ''}: {exc}") from exc
    return ray


def cluster_cpus(address: str | None) -> int:
    """CPUs of the Ray cluster (connecting first)."""
    ray = connect(address)
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def run_tasks(fn: Callable[..., Any], calls: list[tuple[Any, ...]], address: str | None) -> list[Any]:
    """fn(*call) for every call as Ray tasks (one CPU each); the results in order.

    A task's `SsrError` (bad input: file and line) is raised as itself, not wrapped.
    """
    ray = connect(address)
    task = ray.remote(num_cpus=1, max_retries=1, retry_exceptions=False)(fn)
    refs = [task.remote(*c) for c in calls]
    try:
        return list(ray.get(refs))
    except ray.exceptions.RayTaskError as exc:
        for r in refs:
            ray.cancel(r, force=True)
        cause = getattr(exc, "cause", None)
        if isinstance(cause, SsrError):
            raise cause from None
        raise SsrError(f"a shard build failed on Ray: {exc}") from exc

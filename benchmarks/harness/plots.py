"""PNG figures of one or more runs: throughput vs K, latency, build time, peak RSS, index size vs corpus size."""

from __future__ import annotations

from pathlib import Path

from .tables import MIB, throughput


def _plt():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _label(results: dict) -> str:
    return f"{results['collection']['passages']:,} passages, {results['queries_kind']} queries"


def throughput_vs_k(results: dict, path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ks = results["settings"]["k"]
    for i, e in enumerate(results["engines"]):
        for t, style in zip(results["settings"]["threads"], ("-", "--", ":"), strict=False):
            ys = [throughput(e.get("serve"), t, k) for k in ks]
            if any(y is not None for y in ys):
                ax.plot(ks, [y if y is not None else float("nan") for y in ys], style, marker="o", color=f"C{i}",
                        label=f"{e['name']} ({t} thread{'s' if t > 1 else ''})")
    ax.set(xscale="log", yscale="log", xlabel="K", ylabel="queries / s (end to end)",
           title=f"Throughput vs K — {_label(results)}")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def latency(results: dict, path: Path) -> None:
    plt = _plt()
    ks = results["settings"]["k"]
    names = [e["name"] for e in results["engines"]]
    fig, axes = plt.subplots(1, len(ks), figsize=(5 * len(ks), 4.5), squeeze=False)
    for ax, k in zip(axes[0], ks, strict=True):
        for j, p in enumerate(("p50_ms", "p95_ms", "p99_ms")):
            vals = [((e.get("serve") or {}).get("latency", {}).get(str(k)) or {}).get(p, float("nan"))
                    for e in results["engines"]]
            ax.bar([i + (j - 1) * 0.27 for i in range(len(names))], vals, width=0.27, label=p[:3])
        ax.set_xticks(range(len(names)), names, rotation=30, fontsize=8)
        ax.set(yscale="log", ylabel="ms per query (1 thread)", title=f"Latency, K={k}")
        ax.legend(fontsize=7)
    fig.suptitle(_label(results), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _bars(results: dict, path: Path, values: list[float | None], ylabel: str, title: str) -> None:
    plt = _plt()
    names = [e["name"] for e in results["engines"]]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(names, [float("nan") if v is None else v for v in values], color=[f"C{i}" for i in range(len(names))])
    for i, v in enumerate(values):
        ax.text(i, 0, "n/a" if v is None else f"{v:,.1f}", ha="center", va="bottom", fontsize=7)
    ax.set(ylabel=ylabel, title=f"{title} — {_label(results)}")
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build_time(results: dict, path: Path) -> None:
    vals = [None if (e.get("build") or {}).get("shared_with") else (e.get("build") or {}).get("wall_seconds")
            for e in results["engines"]]
    _bars(results, path, vals, "seconds (wall)", "Index build time")


def peak_rss(results: dict, path: Path) -> None:
    vals = [None if (e.get("build") or {}).get("shared_with") else (e.get("build") or {}).get("peak_rss_mib")
            for e in results["engines"]]
    _bars(results, path, vals, "MiB (process tree, sampled)", "Build peak RSS")


def index_size(runs: list[dict], path: Path) -> None:
    """Index bytes against collection bytes, one line per engine across the runs given (several scales)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    points: dict[str, list[tuple[float, float]]] = {}
    for r in runs:
        for e in r["engines"]:
            if e.get("index_bytes") and not (e.get("build") or {}).get("shared_with"):
                points.setdefault(e["name"], []).append((r["collection"]["bytes"] / MIB, e["index_bytes"] / MIB))
    order = [e["name"] for r in runs for e in r["engines"]]
    colour = {name: f"C{i}" for i, name in enumerate(dict.fromkeys(order))}
    for name, pts in points.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=colour[name], label=name)
    xs = [r["collection"]["bytes"] / MIB for r in runs]
    if xs:
        lo, hi = min(xs) / 1.5, max(xs) * 1.5
        ax.plot([lo, hi], [lo, hi], "k:", lw=1, label="index = corpus")
    ax.set(xscale="log", yscale="log", xlabel="collection TSV (MiB)", ylabel="index on disk (MiB)",
           title="Index size vs corpus size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def make_all(results: dict, out: Path, runs: list[dict] | None = None) -> list[Path]:
    """Every figure of `results` into `out`; the size plot also covers `runs` (other scales)."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"throughput_vs_k.png": throughput_vs_k, "latency.png": latency, "build_time.png": build_time,
             "peak_rss.png": peak_rss}
    made = []
    for name, fn in files.items():
        fn(results, out / name)
        made.append(out / name)
    index_size([results, *(runs or [])], out / "index_size.png")
    made.append(out / "index_size.png")
    return made

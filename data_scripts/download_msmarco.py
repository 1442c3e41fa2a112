"""Download and prepare the real MS MARCO passage collection (collection, dev-small queries, qrels).

    python data_scripts/download_msmarco.py --out DIR [--base-url URL] [--checksums FILE]

Fetches `collectionandqueries.tar.gz` (about 1 GB; collection.tsv, queries.dev.small.tsv,
qrels.dev.small.tsv among others) from the MS MARCO storage, verifies its checksum, and
writes the same layout `make_collection.py` writes:

    DIR/collection.tsv    pid<TAB>passage (8,841,823 lines)
    DIR/queries.tsv       qid<TAB>query   (6,980 dev-small queries)
    DIR/qrels.tsv         qid 0 pid 1     (TREC form; 7,437 lines)
    DIR/stats.json        counts and the checksums verified
    DIR/downloads/        the archive (kept, so a rerun verifies instead of downloading)

Resumable: the archive is written to `NAME.part`; a rerun (or a retry after a dropped
connection) asks the server for the rest with an HTTP Range request and appends. A server
that ignores Range gets a fresh download. A checksum mismatch stops with an error naming the
file and both digests; the bad download is renamed `NAME.bad` and nothing already verified or
extracted is touched. Outputs are written to `.tmp` names and renamed when complete.

Checksums (md5 from the Anserini MS MARCO passage guide; Microsoft publishes none):

    collectionandqueries.tar.gz  md5 31644046b18952c1386cd4564ba2ae69

`--checksums FILE` replaces the table: JSON {"archive name": {"md5": "...", "sha256": "..."}};
every digest given is checked; an archive with no entry fails unless --no-verify is given.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path

DEFAULT_BASE_URL = "https://msmarco.z22.web.core.windows.net/msmarcoranking"
# The older address of the same storage: https://msmarco.blob.core.windows.net/msmarcoranking
ARCHIVE = "collectionandqueries.tar.gz"
CHECKSUMS: dict[str, dict[str, str]] = {ARCHIVE: {"md5": "31644046b18952c1386cd4564ba2ae69"}}
# archive member (base name) -> output file
MEMBERS = {"collection.tsv": "collection.tsv", "queries.dev.small.tsv": "queries.tsv",
           "qrels.dev.small.tsv": "qrels.tsv"}
CHUNK = 1 << 20


class DownloadError(Exception):
    """A failure the user must act on; the message says what and where."""


def _progress(total: int | None, initial: int, name: str):  # noqa: ANN202
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a package dependency
        return None
    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, desc=name, file=sys.stderr,
                disable=not sys.stderr.isatty())


def fetch(url: str, dest: Path, retries: int = 3, timeout: float = 60.0) -> dict:
    """Download url to dest via dest.part, resuming with Range; returns what happened."""
    part = dest.with_name(dest.name + ".part")
    resumed: list[int] = []
    restarted = 0
    attempt = 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        req = urllib.request.Request(url, headers={"User-Agent": "ssr_engine-download/1"})
        if have:
            req.add_header("Range", f"bytes={have}-")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status = resp.status
                if have and status == 206:
                    resumed.append(have)
                    mode = "ab"
                    length = resp.headers.get("Content-Length")
                    total = have + int(length) if length else None
                else:
                    if have:
                        restarted += 1  # the server ignored Range: start again
                    have, mode = 0, "wb"
                    length = resp.headers.get("Content-Length")
                    total = int(length) if length else None
                bar = _progress(total, have, dest.name)
                with open(part, mode) as fh:
                    while True:
                        chunk = resp.read(CHUNK)
                        if not chunk:
                            break
                        fh.write(chunk)
                        if bar is not None:
                            bar.update(len(chunk))
                if bar is not None:
                    bar.close()
                size = part.stat().st_size
                if total is not None and size < total:
                    raise ConnectionError(f"connection closed at {size} of {total} bytes")
            os.replace(part, dest)
            return {"url": url, "resumed_from": resumed, "restarted": restarted}
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # nothing left to fetch: the .part is complete
                os.replace(part, dest)
                return {"url": url, "resumed_from": resumed, "restarted": restarted}
            raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            attempt += 1
            if attempt > retries:
                raise DownloadError(f"{url}: {exc} (after {retries} retries; rerun to resume from "
                                    f"{part.stat().st_size if part.exists() else 0} bytes)") from None
            time.sleep(min(2.0 * attempt, 10.0))


def digests(path: Path, algorithms: list[str]) -> dict[str, str]:
    hashers = {a: hashlib.new(a) for a in algorithms}
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(CHUNK)
            if not chunk:
                break
            for h in hashers.values():
                h.update(chunk)
    return {a: h.hexdigest() for a, h in hashers.items()}


def verify(path: Path, expected: dict[str, str]) -> dict[str, str]:
    """Check every digest in `expected`; on a mismatch move the file to NAME.bad and fail."""
    algorithms = sorted(expected)
    for a in algorithms:
        if a not in hashlib.algorithms_available:
            raise DownloadError(f"checksum table: unknown algorithm {a!r} for {path.name}")
    got = digests(path, algorithms)
    bad = [a for a in algorithms if got[a].lower() != expected[a].lower()]
    if bad:
        bad_path = path.with_name(path.name + ".bad")
        os.replace(path, bad_path)
        detail = "; ".join(f"{a} expected {expected[a]}, got {got[a]}" for a in bad)
        raise DownloadError(f"{path.name}: checksum mismatch ({detail}); the download was moved to {bad_path}, "
                            "nothing else was changed")
    return got


def extract(archive: Path, out: Path) -> dict:
    """Stream the needed members out of the archive into the final layout (via .tmp names)."""
    found: dict[str, str] = {}
    counts: dict[str, int] = {}
    tmp_files: list[tuple[Path, Path]] = []
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                base = os.path.basename(member.name)
                if not member.isfile() or base not in MEMBERS or base in found:
                    continue
                target = out / MEMBERS[base]
                tmp = target.with_name(target.name + ".tmp")
                src = tar.extractfile(member)
                assert src is not None
                with src, open(tmp, "wb") as dst:
                    if base.startswith("qrels"):
                        counts[MEMBERS[base]] = _qrels_to_trec(src, dst, member.name)
                    else:
                        shutil.copyfileobj(src, dst, CHUNK)
                if not base.startswith("qrels"):
                    counts[MEMBERS[base]] = _count_lines(tmp)
                found[base] = member.name
                tmp_files.append((tmp, target))
    except (tarfile.TarError, EOFError, OSError) as exc:
        for tmp, _ in tmp_files:
            tmp.unlink(missing_ok=True)
        raise DownloadError(f"{archive}: cannot extract ({exc})") from None
    missing = sorted(set(MEMBERS) - set(found))
    if missing:
        for tmp, _ in tmp_files:
            tmp.unlink(missing_ok=True)
        raise DownloadError(f"{archive}: missing member(s) {', '.join(missing)}")
    for tmp, target in tmp_files:
        os.replace(tmp, target)
    return {"members": found, "lines": counts}


def _qrels_to_trec(src, dst, name: str) -> int:  # noqa: ANN001
    """MS MARCO's tab form `qid<TAB>0<TAB>pid<TAB>rel` (or TREC) -> `qid 0 pid rel`."""
    n = 0
    for lineno, raw in enumerate(src, start=1):
        line = raw.decode("utf-8").strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 4:
            raise DownloadError(f"{name}:{lineno}: expected 'qid 0 pid rel', got {line!r}")
        dst.write(f"{parts[0]} 0 {parts[2]} {parts[3]}\n".encode())
        n += 1
    return n


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(CHUNK)
            if not chunk:
                return n
            n += chunk.count(b"\n")


def run(out: Path, base_url: str, checksums: dict[str, dict[str, str]], no_verify: bool = False,
        retries: int = 3) -> dict:
    downloads = out / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    dest = downloads / ARCHIVE
    expected = checksums.get(ARCHIVE)
    if expected is None and not no_verify:
        raise DownloadError(f"no checksum for {ARCHIVE} in the table (give one with --checksums, or --no-verify)")
    stats: dict = {"base_url": base_url, "archive": ARCHIVE}
    if dest.exists():
        stats["download"] = "already present"
    else:
        stats["download"] = fetch(f"{base_url.rstrip('/')}/{ARCHIVE}", dest, retries=retries)
    stats["bytes"] = dest.stat().st_size
    stats["checksums_verified"] = {} if no_verify or not expected else verify(dest, expected)
    stats.update(extract(dest, out))
    tmp = out / "stats.json.tmp"
    tmp.write_text(json.dumps(stats, indent=2) + "\n")
    os.replace(tmp, out / "stats.json")
    return stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="download_msmarco.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--base-url", default=DEFAULT_BASE_URL, help=f"where the archive lives (default {DEFAULT_BASE_URL})")
    p.add_argument("--checksums", metavar="FILE", help="JSON checksum table replacing the built-in one")
    p.add_argument("--no-verify", action="store_true", help="skip checksum verification")
    p.add_argument("--retries", type=int, default=3, help="retries (each resuming) after a dropped connection")
    args = p.parse_args(argv)
    table = CHECKSUMS
    try:
        if args.checksums:
            try:
                table = json.loads(Path(args.checksums).read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise DownloadError(f"{args.checksums}: cannot read the checksum table ({exc})") from None
            if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
                raise DownloadError(f"{args.checksums}: expected {{\"name\": {{\"md5\": \"...\"}}}}")
        stats = run(Path(args.out), args.base_url, table, args.no_verify, args.retries)
    except DownloadError as exc:
        print(f"download_msmarco.py: error: {exc}", file=sys.stderr)
        return 2
    lines = stats["lines"]
    print(f"{lines['collection.tsv']:,} passages, {lines['queries.tsv']:,} queries, {lines['qrels.tsv']:,} qrels "
          f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

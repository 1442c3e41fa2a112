"""download_msmarco.py against a threaded HTTP server on 127.0.0.1 serving a small archive."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import load_data_script

dl = load_data_script("download_msmarco")

COLLECTION = "".join(f"{i}\tpassage number {i} about topic {i % 7}\n" for i in range(500))
QUERIES = "1048585\twhat is paula deen's brother\n2\t Androgen receptor define\n"
QRELS_TAB = "1048585\t0\t7\t1\n2\t0\t11\t1\n2\t0\t12\t1\n"


def make_archive() -> bytes:
    """The layout of collectionandqueries.tar.gz (plus a member the script must ignore)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in [("collection.tsv", COLLECTION), ("queries.dev.small.tsv", QUERIES),
                           ("qrels.dev.small.tsv", QRELS_TAB), ("queries.train.tsv", "9\tignored\n")]:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


ARCHIVE = make_archive()


class Server:
    """Serves one payload; can honour or ignore Range, and cut the first response short."""

    def __init__(self, payload: bytes, ranges: bool = True, cut_first_at: int | None = None):
        self.payload = payload
        self.ranges = ranges
        self.cut_first_at = cut_first_at
        self.requests: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_GET(self):  # noqa: N802
                rng = self.headers.get("Range")
                outer.requests.append(rng)
                if self.path != "/msmarco/" + dl.ARCHIVE:
                    self.send_error(404)
                    return
                body, start = outer.payload, 0
                if rng and outer.ranges:
                    start = int(rng.split("=")[1].split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                part = body[start:]
                self.send_header("Content-Length", str(len(part)))
                self.end_headers()
                if outer.cut_first_at is not None and len(outer.requests) == 1:
                    self.wfile.write(part[: outer.cut_first_at])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(part)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/msmarco"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def table(tmp_path: Path, payload: bytes = ARCHIVE, md5: str | None = None) -> str:
    path = tmp_path / "checksums.json"
    path.write_text(json.dumps({dl.ARCHIVE: {"md5": md5 or hashlib.md5(payload).hexdigest(),
                                             "sha256": hashlib.sha256(payload).hexdigest()}}))
    return str(path)


def check_layout(out: Path) -> None:
    assert (out / "collection.tsv").read_text() == COLLECTION
    assert (out / "queries.tsv").read_text() == QUERIES
    assert (out / "qrels.tsv").read_text() == "1048585 0 7 1\n2 0 11 1\n2 0 12 1\n"
    stats = json.loads((out / "stats.json").read_text())
    assert stats["lines"] == {"collection.tsv": 500, "queries.tsv": 2, "qrels.tsv": 3}
    assert set(stats["checksums_verified"]) == {"md5", "sha256"}
    assert not list(out.glob("*.tmp"))


def test_download_verify_extract(tmp_path, capsys):
    out = tmp_path / "out"
    with Server(ARCHIVE) as srv:
        rc = dl.main(["--out", str(out), "--base-url", srv.url, "--checksums", table(tmp_path)])
    assert rc == 0
    check_layout(out)
    assert srv.requests == [None]
    assert "500 passages, 2 queries, 3 qrels" in capsys.readouterr().out
    # a rerun verifies the kept archive and downloads nothing
    with Server(ARCHIVE) as srv2:
        assert dl.main(["--out", str(out), "--base-url", srv2.url, "--checksums", table(tmp_path)]) == 0
    assert srv2.requests == []


def test_resume_from_partial_file(tmp_path):
    out = tmp_path / "out"
    part = out / "downloads" / (dl.ARCHIVE + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(ARCHIVE[:1000])
    with Server(ARCHIVE) as srv:
        assert dl.main(["--out", str(out), "--base-url", srv.url, "--checksums", table(tmp_path)]) == 0
    assert srv.requests == ["bytes=1000-"]
    check_layout(out)
    assert not part.exists()


def test_resume_after_dropped_connection(tmp_path, monkeypatch):
    monkeypatch.setattr(dl.time, "sleep", lambda s: None)  # no back-off wait in the test
    out = tmp_path / "out"
    with Server(ARCHIVE, cut_first_at=700) as srv:
        stats = dl.run(out, srv.url, json.loads(Path(table(tmp_path)).read_text()), retries=2)
    assert srv.requests == [None, "bytes=700-"]
    assert stats["download"]["resumed_from"] == [700]
    check_layout(out)


def test_server_without_range_restarts(tmp_path):
    out = tmp_path / "out"
    part = out / "downloads" / (dl.ARCHIVE + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(b"garbage that is not the start of the archive")
    with Server(ARCHIVE, ranges=False) as srv:
        stats = dl.run(out, srv.url, json.loads(Path(table(tmp_path)).read_text()))
    assert stats["download"]["restarted"] == 1
    check_layout(out)


def test_bad_checksum_fails_clearly_and_keeps_good_outputs(tmp_path, capsys):
    out = tmp_path / "out"
    with Server(ARCHIVE) as srv:
        assert dl.main(["--out", str(out), "--base-url", srv.url, "--checksums", table(tmp_path)]) == 0
    (out / "downloads" / dl.ARCHIVE).unlink()
    other = make_archive()[:-10] + b"0123456789"  # a corrupted archive
    with Server(other) as srv:
        rc = dl.main(["--out", str(out), "--base-url", srv.url, "--checksums", table(tmp_path, md5="0" * 32)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "checksum mismatch" in err and dl.ARCHIVE in err and "0" * 32 in err
    assert (out / "downloads" / (dl.ARCHIVE + ".bad")).exists()
    assert not (out / "downloads" / dl.ARCHIVE).exists()
    check_layout(out)  # the earlier, verified outputs are untouched


def test_missing_checksum_and_http_errors(tmp_path, capsys):
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    with Server(ARCHIVE) as srv:
        assert dl.main(["--out", str(tmp_path / "a"), "--base-url", srv.url, "--checksums", str(empty)]) == 2
        assert "no checksum" in capsys.readouterr().err
        assert dl.main(["--out", str(tmp_path / "b"), "--base-url", srv.url + "/nope",
                        "--checksums", table(tmp_path)]) == 2
        assert "HTTP 404" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    assert dl.main(["--out", str(tmp_path / "c"), "--checksums", str(bad)]) == 2
    assert "cannot read the checksum table" in capsys.readouterr().err


def test_archive_missing_a_member(tmp_path, capsys):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("collection.tsv")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"0\t"))
    payload = buf.getvalue()
    with Server(payload) as srv:
        rc = dl.main(["--out", str(tmp_path / "o"), "--base-url", srv.url, "--checksums", table(tmp_path, payload)])
    assert rc == 2
    assert "missing member(s) qrels.dev.small.tsv, queries.dev.small.tsv" in capsys.readouterr().err
    assert not (tmp_path / "o" / "collection.tsv").exists()


@pytest.mark.parametrize("retries", [0])
def test_unreachable_server_fails_clearly(tmp_path, capsys, retries):
    with Server(ARCHIVE) as srv:
        url = srv.url
    rc = dl.main(["--out", str(tmp_path / "o"), "--base-url", url, "--checksums", table(tmp_path),
                  "--retries", str(retries)])
    assert rc == 2
    assert "rerun to resume" in capsys.readouterr().err

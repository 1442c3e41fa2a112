"""The demo's work directory and its cache rules.

The work directory belongs to the demo only when it holds `ssr-demo.json` (the ledger), which the
demo writes when it creates the directory or finds it empty. A directory that exists, is not
empty and has no ledger is refused: the demo never writes into, or deletes from, a directory
it did not create.

Each step (a converted collection, an index, a generated collection) records in the ledger the
paths it wrote and a key: everything its output depends on (input checksums, settings, the
package and index format versions). A step is reused when its key is unchanged and its paths
exist (an index must also open: `format.open_index` checks it); otherwise it is redone, after
removing only the paths the ledger says the demo wrote. A path the demo is about to write that
exists but is not in the ledger stops the demo with an error naming it.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..atomic import write_text
from ..errors import SsrError

LEDGER = "ssr-demo.json"
LEDGER_FORMAT = "ssr-demo-workdir"
LEDGER_VERSION = 1


class WorkDir:
    """A directory owned by the demo, with a ledger of what each step wrote and from what."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.ledger_path = self.path / LEDGER
        if self.ledger_path.is_file():
            self.ledger = self._read()
        elif self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            raise SsrError(f"{self.path}: exists and was not created by `ssr demo` (no {LEDGER}; a work directory "
                           "of ssr_engine 0.1's demo has none either); nothing in it is touched: choose a new or "
                           "empty --workdir, or remove it yourself")
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            self.ledger = {"format": LEDGER_FORMAT, "version": LEDGER_VERSION, "steps": {}}
            self._write()

    def _read(self) -> dict[str, Any]:
        try:
            ledger = json.loads(self.ledger_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SsrError(f"{self.ledger_path}: unreadable demo ledger ({exc}); choose another --workdir") from exc
        if not isinstance(ledger, dict) or ledger.get("format") != LEDGER_FORMAT \
                or not isinstance(ledger.get("steps"), dict):
            raise SsrError(f"{self.ledger_path}: not an `ssr demo` ledger; choose another --workdir")
        if ledger.get("version") != LEDGER_VERSION:
            raise SsrError(f"{self.ledger_path}: ledger version {ledger.get('version')!r}, this ssr_engine writes "
                           f"{LEDGER_VERSION}; choose another --workdir")
        return ledger

    def _write(self) -> None:
        write_text(self.ledger_path, json.dumps(self.ledger, indent=2, sort_keys=True) + "\n")

    def file(self, *parts: str) -> Path:
        return self.path.joinpath(*parts)

    def record(self, step: str) -> dict[str, Any] | None:
        """What the ledger holds for `step` (key, paths, info), or None."""
        return self.ledger["steps"].get(step)

    def fresh(self, step: str, key: dict[str, Any]) -> bool:
        """True when `step` was done with this key and every path it wrote still exists."""
        rec = self.record(step)
        return (rec is not None and rec.get("key") == _plain(key)
                and all(self.path.joinpath(p).exists() for p in rec.get("paths", [])))

    def claim(self, step: str, paths: list[Path]) -> None:
        """Make `paths` ready to be written by `step`: each is removed if the ledger says the demo
        wrote it (for any step; a directory the demo created is the demo's, with its contents);
        a path that exists and the demo did not write is an error, and then nothing is removed."""
        owned = {p for rec in self.ledger["steps"].values() for p in rec.get("paths", [])}
        for path in paths:
            rel = self._relative(path)
            if not path.exists() and not path.is_symlink():
                continue
            if rel not in owned:
                raise SsrError(f"{path}: exists and was not written by `ssr demo`; move it away or choose "
                               "another --workdir")
        for path in paths:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        # a step redone is not done until `done` records it again
        if self.ledger["steps"].pop(step, None) is not None:
            self._write()

    def done(self, step: str, key: dict[str, Any], paths: list[Path], info: dict[str, Any] | None = None) -> None:
        """Record that `step` wrote `paths` from `key`; `info` keeps figures measured while doing it."""
        self.ledger["steps"][step] = {
            "key": _plain(key),
            "paths": [self._relative(p) for p in paths],
            "info": _plain(info or {}),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        self._write()

    def _relative(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.path.resolve()).as_posix()
        except ValueError:
            raise SsrError(f"{path}: outside the demo's work directory {self.path}") from None


def _plain(value: Any) -> Any:
    """JSON's view of a value (tuples as lists), so that a key compares equal to its stored form."""
    return json.loads(json.dumps(value))

"""Where an embedded broker or cluster keeps its data: a directory the caller names (kept), or
a new temporary one (removed when it stops, unless asked to keep it)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path


class DataDir:
    def __init__(self, path: Path | str | None, *, prefix: str, keep: bool = False) -> None:
        self._given = path is not None
        self.keep = keep
        self.path = Path(path) if path is not None else Path(tempfile.mkdtemp(prefix=prefix))
        self.path.mkdir(parents=True, exist_ok=True)

    def release(self) -> None:
        """Remove a temporary directory (one the caller named, or asked to keep, stays)."""
        if not self._given and not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)

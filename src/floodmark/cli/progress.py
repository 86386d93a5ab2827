"""Progress bars for long CLI work (produce of files, reset of many partitions), drawn with
``rich`` on stderr so stdout stays the command's output. ``--progress`` forces a bar,
``--no-progress`` hides it; by default a bar is drawn only when stderr is a terminal."""

from __future__ import annotations

import argparse
import sys
from types import TracebackType
from typing import Any


def add_progress_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="draw a progress bar on stderr (default: when stderr is a terminal)")


class Bar:
    """``with Bar(total, "producing", enabled) as bar: bar.advance(n)``; a no-op when disabled."""

    def __init__(self, total: int, description: str, enabled: bool | None, *,
                 in_bytes: bool = False) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._progress: Any = None  # rich.progress.Progress, imported only when a bar is drawn
        self._task: Any = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            count = DownloadColumn() if in_bytes else MofNCompleteColumn()
            console = Console(file=sys.stderr, force_terminal=enabled or None)
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                      TaskProgressColumn(), count, TimeRemainingColumn(),
                                      console=console, transient=False)
            self._task = self._progress.add_task(description, total=total)

    def advance(self, amount: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, amount)

    def __enter__(self) -> Bar:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

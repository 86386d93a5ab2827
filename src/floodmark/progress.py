"""Progress bars for long work a person watches: the CLI's (produce of files, reset of many
partitions) and the demo's wait phases. Drawn with ``rich`` on stderr, so stdout stays the
command's output; ``--progress`` forces bars, ``--no-progress`` hides them, and by default they
are drawn only when stderr is a terminal; ``ProgressWatch`` tells when such work stops moving. A
leaf module: the CLI and the demo (sibling layers) both use it.

While bars are drawn on a terminal that is also stdout, lines written to stdout appear above the
bars (rich's redirection); when stdout is a pipe or a file, they go there untouched."""

from __future__ import annotations

import argparse
import sys
from types import TracebackType
from typing import Any


def add_progress_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="draw progress bars on stderr (default: when stderr is a terminal)")


class Bars:
    """``with Bars(enabled) as bars: t = bars.add("produced", 3000); bars.update(t, 120)``:
    several bars drawn together; a no-op when disabled (``drawn`` is False)."""

    def __init__(self, enabled: bool | None, *, in_bytes: bool = False) -> None:
        self.drawn = sys.stderr.isatty() if enabled is None else enabled
        self._progress: Any = None  # rich.progress.Progress, imported only when bars are drawn
        if self.drawn:
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
            # Not a terminal (a log, a test's pipe): no width to fit, so room for every column
            # (rich's default of 80 cut "3000/3000" to "300…" beside long descriptions).
            console = Console(file=sys.stderr, force_terminal=enabled or None,
                              width=None if sys.stderr.isatty() else 160)
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                      TaskProgressColumn(), count, TimeRemainingColumn(),
                                      console=console, transient=False,
                                      redirect_stdout=sys.stdout.isatty(),
                                      redirect_stderr=False)

    def add(self, description: str, total: float | None) -> int:
        """A new bar; ``total`` None: a bar with no known end (it pulses)."""
        if self._progress is None:
            return -1
        return int(self._progress.add_task(description, total=total))

    def update(self, task: int, completed: float | None = None, *, advance: float = 0,
               description: str | None = None, total: float | None = None) -> None:
        """Set a bar's position (``completed``) or move it on (``advance``); rename or resize."""
        if self._progress is None or task < 0:
            return
        fields: dict[str, Any] = {}
        if completed is not None:
            fields["completed"] = completed
        if advance:
            fields["advance"] = advance
        if description is not None:
            fields["description"] = description
        if total is not None:
            fields["total"] = total
        self._progress.update(task, **fields)

    def __enter__(self) -> Bars:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()


class Bar(Bars):
    """One bar: ``with Bar(total, "producing", enabled) as bar: bar.advance(n)``."""

    def __init__(self, total: int, description: str, enabled: bool | None, *,
                 in_bytes: bool = False) -> None:
        super().__init__(enabled, in_bytes=in_bytes)
        self._task = self.add(description, total)

    def advance(self, amount: int) -> None:
        self.update(self._task, advance=amount)

    def __enter__(self) -> Bar:
        super().__enter__()
        return self


class ProgressWatch:
    """Waiting on progress, not on a wall-clock guess (sans-I/O: time comes in as ``now_ms``).

    ``observe(now_ms, {"watermark": w, "rows read": n})`` with the values that move while the
    awaited work goes on; it answers None while any of them changed within the last ``stall_ms``,
    and once none has, one line naming what stopped and where it stopped::

        watch = ProgressWatch(stall_ms=60_000, now_ms=now)
        while not done():
            stalled = watch.observe(now, {"watermark": wm, "rows read": rows})
            if stalled:
                raise SystemExit(f"the last windows did not close: {stalled}")
    """

    def __init__(self, stall_ms: int, now_ms: int) -> None:
        self.stall_ms = stall_ms
        self.last: dict[str, object] = {}
        self.moved_ms = now_ms  # when a value last changed (or the watch started)

    def observe(self, now_ms: int, values: dict[str, object]) -> str | None:
        if values != self.last:
            self.last = dict(values)
            self.moved_ms = now_ms
            return None
        if now_ms - self.moved_ms < self.stall_ms:
            return None
        still = ", ".join(f"{name} stayed at {value}" for name, value in values.items())
        return (f"no progress for {(now_ms - self.moved_ms) / 1000:.0f} s"
                + (f": {still}" if still else ""))

"""``floodmark.progress``: the bars the CLI and the demo draw on stderr (rich)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from floodmark.progress import Bar, Bars


def test_bars_draw_on_stderr_and_stay_off_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with Bars(True) as bars:
        produced = bars.add("produced", 3)
        acked = bars.add("acknowledged", 3)
        for i in range(1, 4):
            bars.update(produced, i)
        bars.update(acked, 2, description="acknowledged, 1 failed")
    out, err = capsys.readouterr()
    assert out == ""
    assert "produced" in err and "3/3" in err and "100%" in err
    assert "acknowledged, 1 failed" in err and "2/3" in err


def test_bars_to_a_pipe_keep_every_column_beside_long_descriptions(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's bars on a pipe (its test reads them): the counts are not cut to "300…"."""
    with Bars(True) as bars:
        produced = bars.add("produced", 3000)
        closing = bars.add("spark counts_to_parquet: watermark closes the last windows", 1)
        bars.update(produced, 3000)
        bars.update(closing, 1)
    err = capsys.readouterr().err
    assert "3000/3000" in err and "1/1" in err and "…" not in err


def test_disabled_bars_draw_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with Bar(10, "produce to t", False) as bar:
        bar.advance(10)
        assert not bar.drawn
    assert capsys.readouterr() == ("", "")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")
def test_lines_written_to_a_terminal_stdout_appear_above_the_bars(tmp_path: Path) -> None:
    """On a terminal (tmux's, read back as a person sees it), what the demo writes to stdout
    while bars are drawn stands whole above the bars instead of being overdrawn by them."""
    script = tmp_path / "bars.py"
    script.write_text(
        "import sys, time\n"
        "from floodmark.progress import Bars\n"
        "with Bars(None) as bars:\n"
        "    t = bars.add('waiting', 4)\n"
        "    for i in range(4):\n"
        "        sys.stdout.write(f'event line {i}\\n'); sys.stdout.flush()\n"
        "        bars.update(t, i + 1); time.sleep(0.1)\n"
        "print('finished')\n")
    done = tmp_path / "done"
    session = f"floodmark-bars-{os.getpid()}"
    command = (f"PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))} "
               f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}; touch "
               f"{shlex.quote(str(done))}; sleep 30")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "20",
                    command], check=True, timeout=30)
    try:
        deadline = time.monotonic() + 60
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert done.exists(), "the script did not finish"
        screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], check=True,
                                capture_output=True, text=True, timeout=30).stdout
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, timeout=30)
    lines = [line.rstrip() for line in screen.splitlines() if line.strip()]
    assert lines[:4] == [f"event line {i}" for i in range(4)], screen
    assert lines[4].startswith("waiting") and "4/4" in lines[4] and "100%" in lines[4], screen
    assert lines[5] == "finished", screen


def test_progress_watch_waits_while_anything_moves_and_names_what_stopped() -> None:
    from floodmark.progress import ProgressWatch

    watch = ProgressWatch(stall_ms=10_000, now_ms=0)
    # A slow but moving wait never stalls, however long it takes in all.
    for step in range(1, 100):
        assert watch.observe(step * 9_000, {"watermark": step // 2, "rows read": 100}) is None
    # Then nothing moves: quiet until stall_ms has passed since the last change, then one line.
    last_move = 98 * 9_000  # step 98 last moved the watermark (to 49)
    assert watch.observe(last_move + 9_999, {"watermark": 49, "rows read": 100}) is None
    stalled = watch.observe(last_move + 10_000, {"watermark": 49, "rows read": 100})
    assert stalled == "no progress for 10 s: watermark stayed at 49, rows read stayed at 100"
    assert "\n" not in stalled
    # Any change starts the clock again.
    assert watch.observe(last_move + 20_000, {"watermark": 50, "rows read": 100}) is None
    assert watch.observe(last_move + 29_000, {"watermark": 50, "rows read": 100}) is None

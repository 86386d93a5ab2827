"""The CPU seconds of a command's whole process tree, orphans included.

``tests.cpu_usage`` (``FLOODMARK_TEST_CPU``) counts a test's children once they are reaped: a
process whose parent exits without waiting for it (Spark's JVM under ``floodmark demo``) is
reaped by init, and its CPU is missed (the demo test showed 18.6 CPU s there, its tree used
111.5). This runs the command as a child subreaper (``PR_SET_CHILD_SUBREAPER``): orphans are
re-parented here, waited for, and counted.

    .venv/bin/python benchmarks/tree_cpu.py [--quiet] -- COMMAND ARGS...

Prints the command's output (unless ``--quiet``), then one line: the exit status, the tree's
CPU seconds (user + sys) and the wall seconds. Linux only.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
ORPHANS_WAIT_S = 120.0


def main(argv: list[str]) -> int:
    quiet = bool(argv) and argv[0] == "--quiet"
    if quiet:
        argv = argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: tree_cpu.py [--quiet] -- COMMAND ARGS...", file=sys.stderr)
        return 2
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"tree_cpu.py: prctl failed: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 2
    started = time.monotonic()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL if quiet else None, check=False)
    deadline = time.monotonic() + ORPHANS_WAIT_S  # orphans re-parented here end on their own
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break  # nothing left
        if pid == 0:
            time.sleep(0.2)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"exit {done.returncode}; tree CPU {usage.ru_utime + usage.ru_stime:.1f} s (user "
          f"{usage.ru_utime:.1f} s, sys {usage.ru_stime:.1f} s); wall "
          f"{time.monotonic() - started:.1f} s")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

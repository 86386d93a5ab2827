"""Java options for the JVMs the tests start (real Kafka's nodes and tools, and the Java client
programs under tests/reference/clients).

A test's JVM lives seconds to minutes and runs little hot code: most of its CPU goes to the
optimizing JIT compiler (C2) and the parallel garbage collector's threads, which pay off only in
long runs. ``-XX:TieredStopAtLevel=1`` keeps the quick compiler (C1) only and
``-XX:+UseSerialGC`` collects on the application's thread: the same programs, about half the CPU
to start one (a Kafka tool: 2.6 s -> 1.4 s of CPU). Neither changes what a program does.
"""

from __future__ import annotations

SHORT_RUN_JVM_OPTS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


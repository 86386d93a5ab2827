"""MemoryFileSystem against a tiny reference model: after any sequence of appends, truncates,
fsyncs and crashes, a file holds exactly what the model says."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.storage import MemoryFileSystem

ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.binary(min_size=1, max_size=20)),
        st.tuples(st.just("truncate"), st.integers(0, 60)),
        st.tuples(st.just("fsync"), st.none()),
        st.tuples(st.just("kill"), st.none()),
        st.tuples(st.just("power"), st.none()),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_memory_file_matches_model(operations: list[tuple[str, object]]) -> None:
    fs = MemoryFileSystem()
    fs.mkdirs("/d")
    handle = fs.open("/d/f")
    fs.fsync_dir("/d")
    current = b""
    durable = b""
    for op, arg in operations:
        if op == "write":
            assert isinstance(arg, bytes)
            handle.write(arg)
            current += arg
        elif op == "truncate":
            assert isinstance(arg, int)
            handle.truncate(arg)
            current = current[:arg] + bytes(max(0, arg - len(current)))
        elif op == "fsync":
            handle.fsync()
            durable = current
        elif op == "kill":
            fs.crash(lose_unsynced=False)
        else:
            fs.crash(lose_unsynced=True)
            current = durable
            handle = fs.open("/d/f")
        assert fs.read_file("/d/f") == current
        assert handle.size() == len(current)
        assert fs.durable_bytes("/d/f") == durable

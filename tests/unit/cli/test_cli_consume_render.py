"""``floodmark consume``'s pure parts: kcat's format tokens, kafka-console-consumer's fields, and
the position after a fetched batch of transaction markers (never shown, always skipped)."""

from __future__ import annotations

import argparse

import pytest

from floodmark.cli.common import CliError
from floodmark.cli.consume import Fetched, _records, _unescape, render, render_format
from floodmark.records import Record, build_batch


def _args(**kw: object) -> argparse.Namespace:
    base = {"json": False, "format": None, "key_separator": "\t", "print_timestamp": False,
            "print_partition": False, "print_offset": False, "print_headers": False,
            "print_key": False}
    return argparse.Namespace(**{**base, **kw})


REC = Fetched("orders", 2, Record(41, 1700000000000, b"k1", b"hello", (("a", b"1"), ("b", None))),
              "CreateTime")


def test_format_tokens() -> None:
    fmt = _unescape(r"%t|%p|%o|%k|%s|%T|%h|%K|%S|%%\n")
    assert render_format(fmt, REC) == b"orders|2|41|k1|hello|1700000000000|a=1,b=|2|5|%\n"
    assert render_format("%k %K", Fetched("t", 0, Record(0, 0, None, b""), "CreateTime")) == (
        b" -1")
    with pytest.raises(CliError, match="unknown token %x"):
        render_format("%x", REC)


def test_console_consumer_fields_in_kafkas_order() -> None:
    line = render(_args(print_timestamp=True, print_partition=True, print_offset=True,
                        print_headers=True, print_key=True), REC)
    assert line == b"CreateTime:1700000000000\tPartition:2\tOffset:41\ta=1,b=\tk1\thello\n"
    bare = Fetched("t", 0, Record(3, 0, None, b"v"), "CreateTime")
    assert render(_args(print_headers=True), bare) == b"NO_HEADERS\tv\n"
    assert render(_args(), bare) == b"v\n"


def test_control_batches_are_skipped_but_move_the_position() -> None:
    data = build_batch([Record(10, 5, b"k", b"v"), Record(11, 5, None, b"w")], base_offset=10)
    data += build_batch([Record(12, 6, None, b"marker")], base_offset=12, is_control=True)
    records, next_offset = _records("t", 0, data)
    assert [f.record.offset for f in records] == [10, 11]
    assert next_offset == 13

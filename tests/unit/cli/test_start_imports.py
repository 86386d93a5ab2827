"""What a broker or a CLI command loads at start-up: the test suite starts hundreds of them, so
a module that only a rare path needs is imported where that path begins, not at start."""

from __future__ import annotations

import subprocess
import sys

import crc32c

from floodmark import records

# Loaded only by the paths that use them (a token endpoint, a JWKS URL); crc32c's package
# __init__ would load importlib.metadata (email, zipfile, csv, ...) just to read its version.
NOT_AT_START = ("importlib.metadata", "urllib.request", "http.client", "email.message")

_PROBE = """
import sys
sys.modules["hypothesis"] = None  # as in a floodmark process (floodmark/__init__.py)
import floodmark.broker.broker, floodmark.cli.broker, floodmark.cli.topic, floodmark.records
import floodmark.client.cluster, floodmark.controller.server
print(" ".join(m for m in {names!r} if m in sys.modules))
"""


def test_a_broker_and_a_cli_command_start_without_the_rare_paths_modules() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(names=NOT_AT_START)],
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == []


def test_crc32c_is_the_packages_function() -> None:
    for data in (b"", b"123456789", bytes(range(256)) * 3):
        assert records.crc32c_of(data) == crc32c.crc32c(data)
    assert records.crc32c_of(b"123456789") == 0xE3069283  # CRC-32C's check value


def test_the_cli_filters_by_kafkas_config_source_names() -> None:
    from floodmark.cli import config as cli_config
    from floodmark.settings import ConfigSource

    assert set(cli_config._DYNAMIC.values()) <= set(ConfigSource.__members__)
    assert cli_config.source_name(int(ConfigSource.DYNAMIC_TOPIC_CONFIG)) == "DYNAMIC_TOPIC_CONFIG"
    assert cli_config.source_name(99) == "source 99"

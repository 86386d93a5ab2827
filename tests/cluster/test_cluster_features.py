"""Feature levels chosen when a cluster is made, as ``kafka-storage format --feature NAME=LEVEL``
/ ``--release-version X.Y``: ``floodmark cluster up`` hands them to its controllers, which
write the ``feature_level`` records of a new metadata log; ApiVersions then finalizes them.
Every mistake is one line before any process starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from floodmark.cli import main
from floodmark.client.connection import KafkaConnection
from floodmark.features import TRANSACTION_VERSION
from floodmark.wire.api_table import ApiKey


def _run(*args: str, cwd: Path, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floodmark.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=str(cwd))


def _finalized(bootstrap: str) -> dict[str, int]:
    with KafkaConnection(bootstrap) as c:
        resp: Any = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "features",
                                                      "client_software_version": "1"})
    return {str(f.name): int(f.max_version_level) for f in resp.finalized_features}


def test_bad_feature_levels_are_one_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """In process (each is refused before anything starts): ``main``'s one line and exit 2."""
    new = ["--data-dir", str(tmp_path / "new"), "--detach"]
    for argv, needle in (
            (["--feature", "transaction.version=3"], "transaction.version=3 is outside the "
                                                     "supported range 0-2"),
            (["--feature", "no.such.version=1"], "unknown feature 'no.such.version'"),
            (["--feature", "transaction.version"], "expected NAME=LEVEL"),
            (["--feature", "transaction.version=two"], "is not a whole number"),
            (["--feature", "transaction.version=0", "--feature", "transaction.version=2"],
             "given twice"),
            (["--release-version", "2.8"], "--release-version '2.8' is not one this release "
                                           "knows"),
            (["--feature", "transaction.version=0", "--controller", "127.0.0.1:1"],
             "they run elsewhere")):
        assert main(["cluster", "up", *new, *argv]) != 0
        _one_line(capsys.readouterr().err, needle)
    assert not (tmp_path / "new" / "cluster.json").exists()  # nothing was made
    assert main(["broker", "--data-dir", str(tmp_path / "b"), "--listen", "127.0.0.1:0",
                 "--release-version", "9.9"]) == 2
    _one_line(capsys.readouterr().err, "is not one this release")
    assert not (tmp_path / "b").exists()


def _one_line(stderr: str, needle: str) -> None:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], stderr


def test_cluster_up_formats_the_chosen_levels(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "cl"
    dd = ["--data-dir", str(data)]
    up = _run("cluster", "up", "--detach", "--brokers", "1", "--controllers", "1", *dd,
              "--release-version", "3.9", "--feature", f"{TRANSACTION_VERSION}=1",
              "--controller-set", "broker.session.timeout.ms=1500", cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    try:
        bootstrap = up.stdout.split("bootstrap: ")[1].split()[0]
        # --feature overrides the release's level (3.9: transaction version 0)
        assert _finalized(bootstrap) == {TRANSACTION_VERSION: 1}
        # the same directory with other levels: refused, in one line
        assert _run("cluster", "down", *dd, cwd=tmp_path).returncode == 0
        assert main(["cluster", "up", "--detach", *dd, "--feature",
                     f"{TRANSACTION_VERSION}=2"]) != 0
        _one_line(capsys.readouterr().err, f"--feature {TRANSACTION_VERSION}=2 (it has "
                                           f"--feature {TRANSACTION_VERSION}=1)")
    finally:
        _run("cluster", "down", *dd, cwd=tmp_path)

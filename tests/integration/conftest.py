"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from floodmark.cli.main import main

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def fm_in_process(broker, capsys: pytest.CaptureFixture[str]) -> Run:
    """``fm_in_process(*argv) -> (exit status, stdout, stderr)``: the CLI run in this process
    (``floodmark.cli.main.main``, the console script's code, over real sockets) against the
    session's broker, ``--bootstrap-server`` added."""
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        rc = main([*argv, "--bootstrap-server", broker.bootstrap])
        out, err = capsys.readouterr()
        return rc, out, err
    return run

"""One parser for the controller's settings: the controller process and a combined node
(``cluster_member --controller-data-dir``) take the same options and make the same settings of
them; a bad value is one line and exit code 2 from either, before anything starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from floodmark.broker import cluster_member
from floodmark.controller import __main__ as controller_main
from floodmark.controller.startup import add_controller_arguments, controller_setup

SETTINGS = ["--broker-session-timeout-ms", "1234", "--unclean-leader-election-enable", "true",
            "--auto-leader-rebalance-enable", "false",
            "--leader-imbalance-check-interval-ms", "777",
            "--controller-quorum-voters", "1@127.0.0.1:9301,2@127.0.0.1:9302,3@h3:9303",
            "--controller-quorum-election-timeout-ms", "300",
            "--controller-quorum-fetch-timeout-ms", "600",
            "--controller-quorum-election-backoff-max-ms", "400",
            "--controller-quorum-request-timeout-ms", "500",
            "--metadata-log-segment-bytes", "4096",
            "--metadata-log-max-record-bytes-between-snapshots", "2048"]


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_controller_arguments(p)
    return p.parse_args(argv)


def test_every_option_reaches_the_settings() -> None:
    setup = controller_setup(_parse(SETTINGS), 2)
    assert setup.config.broker_session_timeout_ms == 1234
    assert setup.config.unclean_leader_election_enable is True
    assert setup.config.auto_leader_rebalance_enable is False
    assert setup.config.leader_imbalance_check_interval_ms == 777
    assert setup.metadata_log.segment_bytes == 4096
    assert setup.metadata_log.max_record_bytes_between_snapshots == 2048
    assert setup.quorum is not None
    quorum, voters = setup.quorum
    assert (quorum.node_id, quorum.voters) == (2, (1, 2, 3))
    assert (quorum.election_timeout_ms, quorum.fetch_timeout_ms,
            quorum.election_backoff_max_ms, quorum.request_timeout_ms) == (300, 600, 400, 500)
    assert voters[3] == ("h3", 9303)
    assert setup.own_address == ("127.0.0.1", 9302)
    assert setup.voter_addresses == ["127.0.0.1:9301", "127.0.0.1:9302", "h3:9303"]
    alone = controller_setup(_parse([]), 0)
    assert alone.quorum is None and alone.own_address is None and alone.voter_addresses == []


@pytest.mark.parametrize("bad, needle", [
    (["--controller-quorum-voters", "1@nowhere"], "nowhere"),
    (["--controller-quorum-voters", "1@h:1,2@h:2"], "not one of the voters"),
    (["--metadata-log-segment-bytes", "10"], "--metadata-log-segment-bytes"),
    (["--broker-session-timeout-ms", "0"], "--broker-session-timeout-ms"),
])
def test_bad_settings_are_one_line_from_both_processes(
        bad: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [
        lambda: controller_main.main(["--node-id", "7", "--data-dir", str(tmp_path / "c"),
                                      *bad]),
        lambda: cluster_member.main(["--node-id", "7", "--data-dir", str(tmp_path / "b"),
                                     "--controller-data-dir", str(tmp_path / "cb"),
                                     "--controller", "127.0.0.1:0", *bad]),
    ]
    for run in runs:
        assert run() == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "c").exists() and not (tmp_path / "cb").exists()  # nothing started


def test_a_broker_finds_the_controllers_from_the_voters_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Neither --controller nor voters: one line. A pure broker is no voter, so a voter set
    without its id is fine for it (only the addresses are used); bad addresses are one line."""
    assert cluster_member.main(["--node-id", "4", "--data-dir", str(tmp_path / "b")]) == 2
    assert "--controller-quorum-voters" in capsys.readouterr().err
    assert cluster_member.main(["--node-id", "4", "--data-dir", str(tmp_path / "b"),
                                "--controller-quorum-voters", "1@h:x"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_cluster_up_gives_combined_nodes_the_controller_settings(tmp_path: Path) -> None:
    from floodmark.cluster.local import LocalCluster

    cluster = LocalCluster(tmp_path / "c", 3, {"min.insync.replicas": "2"},
                           {"broker.session.timeout.ms": "1234"}, combined=True)
    for node in (1, 2, 3):
        cmd = cluster._command(node)
        assert cmd[cmd.index("--controller-data-dir") + 1].endswith(f"controller-{node}")
        assert cmd[cmd.index("--broker-session-timeout-ms") + 1] == "1234"
        assert cmd[cmd.index("--eligible-leader-replicas-version") + 1] == "1"  # KIP-966
        assert cmd[cmd.index("--min-insync-replicas") + 1] == "2"
        assert cmd[cmd.index("--controller-quorum-voters") + 1].count("@") == 3

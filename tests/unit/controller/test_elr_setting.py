"""``eligible.leader.replicas.version`` (KIP-966) from the setting registry to the controller's
config: its default, its check, the controller's command line, and what ``cluster up`` and
``chaos run`` start controllers with. Pure (no processes are started)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from floodmark.chaos.run import ChaosConfig, _controller_settings
from floodmark.cluster.local import LocalCluster
from floodmark.controller.__main__ import main as controller_main
from floodmark.controller.logic import ControllerConfig, elr_config
from floodmark.controller.startup import add_controller_arguments, controller_setup
from floodmark.settings import DEFAULTS, eligible_leader_replicas_enabled


def test_on_by_default_as_kafka_4_1_for_new_clusters() -> None:
    assert DEFAULTS["eligible.leader.replicas.version"] == 1
    assert eligible_leader_replicas_enabled("1") and not eligible_leader_replicas_enabled(0)
    for bad in ("2", "-1", "yes"):
        with pytest.raises(ValueError, match=r"eligible\.leader\.replicas\.version"):
            eligible_leader_replicas_enabled(bad)


def test_the_setting_turns_on_elr_and_the_unclean_shutdown_rule_together() -> None:
    on = ControllerConfig(**elr_config(True, 2))
    assert on.eligible_leader_replicas_enable and on.unclean_shutdown_leaves_isr
    assert on.min_insync_replicas == 2
    off = ControllerConfig(**elr_config(False, 2))
    assert not off.eligible_leader_replicas_enable and not off.unclean_shutdown_leaves_isr


def test_the_controller_refuses_a_bad_version_in_one_line(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    for flag, value in (("--eligible-leader-replicas-version", "3"),
                        ("--min-insync-replicas", "0")):
        with pytest.raises(SystemExit) as exited:
            controller_main(["--data-dir", str(tmp_path), flag, value])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert flag in err and "Traceback" not in err


def test_cluster_up_passes_it_and_the_brokers_min_isr_to_the_controller(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "on", 3, {"min.insync.replicas": "2"})
    cmd = cluster._command(0)
    assert cmd[cmd.index("--eligible-leader-replicas-version") + 1] == "1"
    assert cmd[cmd.index("--min-insync-replicas") + 1] == "2"
    off = LocalCluster(tmp_path / "off", 3, {},
                       {"eligible.leader.replicas.version": "0"})._command(0)
    assert off[off.index("--eligible-leader-replicas-version") + 1] == "0"
    assert "--min-insync-replicas" not in off  # the controller's own default (1), as the brokers'


def test_chaos_runs_it_unless_told_not_to() -> None:
    assert _controller_settings(ChaosConfig())["eligible.leader.replicas.version"] == "1"
    off = ChaosConfig(eligible_leader_replicas=False)
    assert _controller_settings(off)["eligible.leader.replicas.version"] == "0"


def test_combined_mode_takes_the_nodes_own_settings_unless_flags_say_otherwise() -> None:
    p = argparse.ArgumentParser()
    add_controller_arguments(p)
    own = {"eligible.leader.replicas.version": 0, "min.insync.replicas": 2}.get
    combined = controller_setup(p.parse_args([]), 1, own).config
    assert not combined.eligible_leader_replicas_enable and combined.min_insync_replicas == 2
    flagged = controller_setup(p.parse_args(["--eligible-leader-replicas-version", "1"]), 1, own)
    assert flagged.config.eligible_leader_replicas_enable
    alone = controller_setup(p.parse_args([]), 0).config  # a controller process: the registry's
    assert alone.eligible_leader_replicas_enable and alone.min_insync_replicas == 1

"""``broker.rack`` (KIP-36) from the setting to the controller's records and back: the
``register_broker`` record carries it, brokers' images and snapshots keep it, a restarted
controller still knows it, a bad one is refused in one line; ``cluster up --racks`` gives the
brokers their racks round-robin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from floodmark.broker.broker import Broker
from floodmark.broker.config import BrokerConfig
from floodmark.cli.common import CliError
from floodmark.cli.main import build_parser
from floodmark.client.connection import decode_response, encode_request
from floodmark.cluster.local import LocalCluster
from floodmark.controller.image import MetadataImage
from floodmark.controller.logic import ControllerConfig, ControllerLogic
from floodmark.controller.metadata_log import MetadataLogConfig
from floodmark.controller.record_check import check_record
from floodmark.controller.server import ControllerServer
from floodmark.controller.snapshot import image_from_records, image_records
from floodmark.errors import ErrorCode, KafkaError
from floodmark.settings import SETTINGS, ConfigType


def test_the_setting_is_kafkas_broker_rack_null_by_default(tmp_path: Path) -> None:
    setting = SETTINGS["broker.rack"]
    assert setting.default is None and setting.type is ConfigType.STRING and not setting.dynamic
    assert BrokerConfig.load(data_dir=tmp_path).rack is None
    assert BrokerConfig.load(data_dir=tmp_path, overrides=["broker.rack=eu-1a"]).rack == "eu-1a"
    assert BrokerConfig.load(data_dir=tmp_path, overrides=["broker.rack= "]).rack is None
    # A rack that looks like a number stays the text it was given.
    assert BrokerConfig.load(data_dir=tmp_path, overrides=["broker.rack=1.10"]).rack == "1.10"
    toml = tmp_path / "broker.toml"
    toml.write_text('"broker.rack" = 3\n')
    assert BrokerConfig.load(data_dir=tmp_path, config_file=toml).rack == "3"


def test_a_lone_broker_answers_its_rack_in_metadata_and_describe_cluster(tmp_path: Path) -> None:
    config = BrokerConfig.load(data_dir=tmp_path / "data", listen="127.0.0.1:9999",
                               overrides=["broker.rack=r1", "offsets.topic.num.partitions=1"])
    broker = Broker(config)
    broker.open()
    try:
        def call(api_key: int, version: int, body: dict[str, object]) -> Any:
            out = broker.dispatch(memoryview(encode_request(api_key, version, 7, body)[4:]),
                                  None)  # type: ignore[arg-type]
            assert isinstance(out, list), "answered at once"
            return decode_response(b"".join(bytes(p) for p in out)[4:], api_key, version, 7)

        meta = call(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False})
        assert [(b.node_id, b.rack) for b in meta.brokers] == [(1, "r1")]
        cluster = call(60, 0, {"include_cluster_authorized_operations": False})
        assert [(b.broker_id, b.rack) for b in cluster.brokers] == [(1, "r1")]
        image = broker.membership.controller.logic.image  # type: ignore[attr-defined]
        assert image.brokers[1].rack == "r1"  # registered in its own metadata log
    finally:
        broker.close()


def test_the_registration_record_carries_the_rack_and_only_when_there_is_one() -> None:
    logic = ControllerLogic(MetadataImage(), ControllerConfig())
    logic.bootstrap()
    logic.register_broker(1, "127.0.0.1", 9001, "a", 0, rack="r1")
    logic.register_broker(2, "127.0.0.1", 9002, "b", 0)
    regs = [rec for _, rec in logic.take_pending() if rec["type"] == "register_broker"]
    assert [rec.get("rack") for rec in regs] == ["r1", None]
    assert "rack" not in regs[1]  # a broker without a rack writes the record as before
    assert logic.image.brokers[1].rack == "r1" and logic.image.brokers[2].rack is None
    # A snapshot keeps it.
    again = image_from_records(logic.image.next_offset, image_records(logic.image))
    assert {b: r.rack for b, r in again.brokers.items()} == {1: "r1", 2: None}
    # A new incarnation registers its rack anew (a broker moved to another rack).
    logic.register_broker(1, "127.0.0.1", 9001, "a2", 10, rack="r2")
    assert logic.image.brokers[1].rack == "r2"


@pytest.mark.parametrize("rack", ["", 7, ["a"]])
def test_a_bad_rack_in_a_record_is_refused(rack: object) -> None:
    rec = {"type": "register_broker", "broker_id": 1, "broker_epoch": 3, "host": "h",
           "port": 1, "incarnation": "x", "rack": rack}
    with pytest.raises(KafkaError) as err:
        check_record(rec)
    assert "rack must be a non-empty string" in err.value.message


def _controller(path: Path, snapshot_bytes: int) -> ControllerServer:
    return ControllerServer(str(path), ControllerConfig(), 0, None,
                            MetadataLogConfig(segment_bytes=4096,
                                              max_record_bytes_between_snapshots=snapshot_bytes))


@pytest.mark.parametrize("snapshot_bytes", [0, 1500])
def test_a_restarted_controller_keeps_every_brokers_rack(tmp_path: Path,
                                                         snapshot_bytes: int) -> None:
    server = _controller(tmp_path, snapshot_bytes)
    for b, rack in ((1, "a"), (2, "b"), (3, None)):
        args: dict[str, object] = {"broker_id": b, "host": "127.0.0.1", "port": 9000 + b,
                                   "incarnation": f"i{b}"}
        if rack is not None:
            args["rack"] = rack
        assert "result" in server.call("register", args)
    for i in range(30 if snapshot_bytes else 1):  # enough records for snapshots to be taken
        assert "result" in server.call("create_topic", {"name": f"t{i}", "num_partitions": 2,
                                                        "replication_factor": 2})
    assert (server.snapshots.ids() != []) == bool(snapshot_bytes)
    server.mlog.close()
    again = _controller(tmp_path, snapshot_bytes)
    assert {b: r.rack for b, r in again.image.brokers.items()} == {1: "a", 2: "b", 3: None}
    again.mlog.close()


def test_a_registration_with_a_rack_that_is_not_text_is_refused_and_writes_nothing(
        tmp_path: Path) -> None:
    server = _controller(tmp_path, 0)
    before = server.image.next_offset
    answer = server.call("register", {"broker_id": 1, "host": "127.0.0.1", "port": 9001,
                                      "incarnation": "i", "rack": 12})
    assert answer.get("error") == int(ErrorCode.INVALID_REQUEST)
    assert "broker.rack must be text" in str(answer.get("message"))
    assert server.image.next_offset == before and 1 not in server.image.brokers
    server.mlog.close()


# -- cluster up --racks -----------------------------------------------------------------------
def test_local_cluster_gives_racks_round_robin_and_passes_them_as_broker_rack(
        tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", brokers=4, racks=["a", "b", "c"],
                           die_with_supervisor=False)
    assert {b: cluster.node(b).get("rack") for b in cluster.broker_ids} == {
        1: "a", 2: "b", 3: "c", 4: "a"}
    assert all("rack" not in cluster.node(c) for c in cluster.controller_ids)
    assert "broker.rack=b" in cluster._command(2)
    assert {n["id"]: n.get("rack") for n in cluster.status()["nodes"]} == {
        0: None, 1: "a", 2: "b", 3: "c", 4: "a"}
    assert cluster.add_brokers(6) == [5, 6]
    assert [cluster.node(b)["rack"] for b in (5, 6)] == ["b", "c"]
    plain = LocalCluster(tmp_path / "p", brokers=2, die_with_supervisor=False)
    assert not any("broker.rack" in arg for arg in plain._command(1))


def _up(argv: list[str]) -> None:
    from floodmark.cli.cluster import _cluster_for_up

    _cluster_for_up(build_parser().parse_args(["cluster", "up", *argv]))


def test_cluster_up_refuses_bad_racks_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="none empty"):
        _up(["--racks", "a,,b", "--data-dir", str(tmp_path / "x")])
    with pytest.raises(CliError, match="give one of them"):
        _up(["--racks", "a,b", "--set", "broker.rack=c", "--data-dir", str(tmp_path / "y")])
    # An existing cluster keeps the racks it was made with.
    LocalCluster(tmp_path / "z", brokers=2, racks=["a", "b"], die_with_supervisor=False)._save()
    with pytest.raises(CliError, match=r"--racks a,c \(it has a,b\)"):
        _up(["--racks", "a,c", "--data-dir", str(tmp_path / "z")])
    _up(["--racks", "a, b", "--data-dir", str(tmp_path / "z")])  # the same again is fine

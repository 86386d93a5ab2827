"""What a broker imports and builds at start: the test suite starts hundreds of brokers, so the
coordinators (groups, consumer groups, share groups, transactions) and their modules are built
at their first use, and a new broker's empty ``__consumer_offsets`` is not replayed into them.
The coordinators themselves are tested where they are used (their handlers' tests)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from floodmark.broker.broker import Broker
from floodmark.broker.config import BrokerConfig
from floodmark.broker.handlers import HANDLERS
from floodmark.client.connection import encode_request
from floodmark.wire.api_table import ApiKey

COORDINATOR_MODULES = (
    "floodmark.broker.groups", "floodmark.groups.offsets",
    "floodmark.groups.consumer_group.core", "floodmark.broker.share_group.driver",
    "floodmark.broker.share_group.share_coordinator", "floodmark.broker.txn_coordinator",
    "floodmark.broker.handlers.group_apis", "floodmark.broker.handlers.txn_apis",
    "floodmark.broker.handlers.share_group_apis", "floodmark.broker.handlers.acls",
)

# A lone broker on a new data directory, opened (it creates and leads __consumer_offsets)
# and serving: which coordinator modules has it loaded?
_PROBE = """
import asyncio, sys
sys.modules["hypothesis"] = None  # as in a floodmark process (floodmark/__init__.py)
from floodmark.broker.broker import Broker
from floodmark.broker.config import BrokerConfig
import floodmark.broker.cluster_member, floodmark.cli.broker

broker = Broker(BrokerConfig.load(data_dir={data_dir!r}, listen="127.0.0.1:0"))
broker.open()

async def main() -> None:
    task = asyncio.create_task(broker.serve(lambda port: broker.stop()))
    await asyncio.wait_for(task, 60)

asyncio.run(main())
print(" ".join(m for m in {names!r} if m in sys.modules))
"""


def test_a_new_broker_opens_and_serves_without_the_coordinators_modules(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(data_dir=str(tmp_path / "d"),
                                             names=COORDINATOR_MODULES)],
        capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == [], out.stderr[-2000:]


def test_the_coordinators_are_built_at_first_use(tmp_path: Path) -> None:
    config = BrokerConfig.load(data_dir=tmp_path / "d", listen="127.0.0.1:9999",
                               overrides=["offsets.topic.num.partitions=2"])
    broker = Broker(config)
    broker.open()
    try:
        built = ("offsets", "groups", "consumer_groups", "share_groups", "transactions")
        assert [name for name in built if name in broker.__dict__] == []
        assert broker.offsets_loaded == {0: 0, 1: 0}  # led and loaded: nothing to replay
        # every client's first request: answered from the settings, nothing built
        frame = encode_request(ApiKey.API_VERSIONS, 3, 7, {
            "client_software_name": "t", "client_software_version": "1"})[4:]
        assert isinstance(broker.dispatch(memoryview(frame), None), list)  # type: ignore[arg-type]
        assert broker.share_groups_enabled is False
        assert [name for name in built if name in broker.__dict__] == []
        assert broker.coordinator_error("g") == 0  # this broker coordinates every group
        groups = broker.groups
        assert broker.groups is groups  # built once
        assert groups.groups == {}
        assert broker.consumer_groups.groups == {}
        assert "offsets" not in broker.__dict__
        broker.unload_offsets_partition(0)  # forgets what it holds of that partition
        assert broker.offsets_loaded == {1: 0}
    finally:
        broker.close()


def test_the_handler_table_imports_a_module_at_the_first_request_of_its_api() -> None:
    join = HANDLERS[ApiKey.JOIN_GROUP]
    assert HANDLERS[ApiKey.JOIN_GROUP] is join  # resolved once
    assert join.__wrapped__.__module__ == "floodmark.broker.handlers.classic_protocol"  # coordinated
    assert HANDLERS[ApiKey.API_VERSIONS].__module__ == "floodmark.broker.handlers.admin"
    assert len(HANDLERS) == len(list(HANDLERS))


def test_a_coordinator_built_on_a_serving_broker_is_started(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig.load(data_dir=tmp_path / "d", listen="127.0.0.1:0"))
    broker.open()
    running: list[bool] = []

    def ready(_port: int) -> None:
        running.append(broker.transactions._running)  # built now, by the first use
        broker.stop()

    async def main() -> None:
        await asyncio.wait_for(broker.serve(ready), 60)

    asyncio.run(main())
    assert running == [True]

"""aiokafka 0.14 against a real floodmark broker process."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.compat.dataset import CODECS, TOPIC_CONFIGS, all_messages, canonical, messages

pytestmark = pytest.mark.compat

TOPIC = "aio-compat"
PARTITIONS = 2


async def _produce(bootstrap: str, msgs, codec: str, idempotent: bool = False) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                         compression_type=None if codec == "none" else codec,
                         max_request_size=3 << 20, enable_idempotence=idempotent)
    await p.start()
    try:
        futs = [await p.send(TOPIC, key=k, value=v, headers=list(h)) for k, v, h in msgs]
        metas = await asyncio.gather(*futs)
        assert len(metas) == len(msgs)
    finally:
        await p.stop()


async def _consume(c: AIOKafkaConsumer, want: int, timeout_s: float = 30.0):
    got = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while len(got) < want and loop.time() < deadline:
        batches = await c.getmany(timeout_ms=500)
        for recs in batches.values():
            got.extend((r.key, r.value, tuple(r.headers)) for r in recs)
    return got


async def _flow(broker) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, topic_configs=TOPIC_CONFIGS)])
    assert TOPIC in await admin.list_topics()
    await admin.close()

    expected = all_messages("aio")
    n = len(messages("x"))
    for i, codec in enumerate(CODECS):
        await _produce(broker.bootstrap, expected[i * n:(i + 1) * n], codec, idempotent=i % 2 == 0)
    await _produce(broker.bootstrap, expected[-1:], "none")

    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                         max_partition_fetch_bytes=4 << 20, fetch_max_bytes=8 << 20)
    await c.start()
    c.assign(tps)
    await c.seek_to_beginning()
    got = await _consume(c, len(expected))
    assert canonical(got) == canonical(expected)
    end = await c.end_offsets(tps)
    assert sum(end.values()) == len(expected)
    assert all(v == 0 for v in (await c.beginning_offsets(tps)).values())
    times = await c.offsets_for_times({tp: 0 for tp in tps})
    assert all(times[tp] is not None and times[tp].offset == 0 for tp in tps if end[tp])
    await c.stop()

    g = AIOKafkaConsumer(TOPIC, bootstrap_servers=broker.bootstrap, group_id="aio-group",
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         max_partition_fetch_bytes=4 << 20, fetch_max_bytes=8 << 20)
    await g.start()
    got = await _consume(g, len(expected), timeout_s=60)
    assert canonical(got) == canonical(expected)
    await g.commit()
    assert {tp: await g.committed(tp) for tp in tps} == end
    await g.stop()

    broker.restart()
    more = messages("aio-after-restart")
    await _produce(broker.bootstrap, more, "gzip", idempotent=True)
    broker.restart(crash=True)
    c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                         max_partition_fetch_bytes=4 << 20, fetch_max_bytes=8 << 20)
    await c.start()
    c.assign(tps)
    await c.seek_to_beginning()
    got = await _consume(c, len(expected) + len(more))
    assert canonical(got) == canonical(expected + more)
    await c.stop()
    g = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="aio-group",
                         enable_auto_commit=False)
    await g.start()
    assert {tp: await g.committed(tp) for tp in tps} == end
    await g.stop()


def test_aiokafka_full_flow(broker) -> None:
    asyncio.run(asyncio.wait_for(_flow(broker), 180))

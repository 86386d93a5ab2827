"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).

Describe reads the broker's metadata image; Alter forwards the salted passwords to the
controller, which turns them into credentials and decides (``controller/scram.py``: each user's
changes together or not at all, Kafka's errors and messages).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.controller import scram
from floodmark.errors import ErrorCode, KafkaError
from floodmark.wire import RequestHeader

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext


def describe_user_scram_credentials(broker: HandlerContext, header: RequestHeader,
                                    req: WireRequest, conn: ClientConnection) -> WireResponse:
    names = None if req.users is None else [str(u.name) for u in req.users]
    described = scram.describe(broker.controller.scram_credentials(), names)
    return {"error_code": 0, "results": [
        {"user": d.user, "error_code": int(d.error), "error_message": d.message,
         "credential_infos": [{"mechanism": int(m), "iterations": i}
                              for m, i in d.credentials]}
        for d in described]}


async def alter_user_scram_credentials(broker: HandlerContext, header: RequestHeader,
                                       req: WireRequest, conn: ClientConnection
                                       ) -> WireResponse:
    deletions = [scram.Deletion(str(d.name), int(d.mechanism)) for d in req.deletions]
    upsertions = [scram.Upsertion(str(u.name), int(u.mechanism), int(u.iterations),
                                  bytes(u.salt), bytes(u.salted_password))
                  for u in req.upsertions]
    try:
        results = await broker.controller.alter_scram_credentials(deletions, upsertions)
    except KafkaError as exc:  # no controller decided: every user gets its answer
        users = dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions])
        return {"results": [{"user": u, "error_code": int(exc.code),
                             "error_message": exc.message} for u in users]}
    return {"results": [{"user": r.user, "error_code": int(r.error),
                         "error_message": r.message if r.error is not ErrorCode.NONE else None}
                        for r in results]}

"""UnregisterBroker (API 64, ``Admin.unregisterBroker``, ``kafka-cluster unregister --id N``):
the controller removes a broker's registration (``ControllerLogic.unregister_broker``, an
``unregister_broker`` metadata record, so it holds after a controller restart). Alter on the
cluster (dispatch's check). BROKER_ID_NOT_REGISTERED for an id with no registration, with
Kafka's message (differential scenario ``unregister_broker``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.broker.boundary import ClientConnection, WireRequest, WireResponse
from floodmark.errors import KafkaError
from floodmark.wire import RequestHeader

if TYPE_CHECKING:
    from floodmark.broker.context import HandlerContext


async def unregister_broker(broker: HandlerContext, header: RequestHeader, req: WireRequest,
                            conn: ClientConnection) -> WireResponse:
    try:
        await broker.controller.unregister_broker(int(req.broker_id))
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": int(exc.code),
                "error_message": exc.message or None}
    return {"throttle_time": 0, "error_code": 0, "error_message": None}

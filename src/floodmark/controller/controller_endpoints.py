"""Where a broker dials the controllers: the bootstrap list until the quorum says otherwise.

Kafka's broker reaches the active controller at the endpoint the quorum's voter set gives for
the leader (``RaftControllerNodeProvider``: the KRaft leader id, then ``voterNode(id,
controller listener)`` of the latest ``VotersRecord`` in the metadata log or snapshot,
KIP-853); ``controller.quorum.bootstrap.servers`` only serves until it knows the voter set. A
floodmark broker learns the same from the metadata log it replays: each committed
``voter_set`` record names the endpoints UpdateRaftVoter moved (``MetadataImage.voter_set``;
a voter it does not name listens where ``controller.quorum.voters`` says, which for a broker
is its ``--controller`` list). So a controller restarted on a new port stays reachable even
when the broker's list names only its old one.

A ``--controller`` entry carries no id: the broker learns whose it is from the controller that
answers there (``controller_id`` in every answer). An entry whose controller the voter set now
places elsewhere is replaced by that endpoint; an entry never answered stays (a fallback that
costs one refused connection). Pure bookkeeping: no sockets, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MAX_ANSWERED = 64
"""Addresses whose controller id is remembered, at most (a broker dials a handful)."""


class ControllerEndpoints:
    def __init__(self, bootstrap: Iterable[str], voters: Mapping[int, str] | None = None) -> None:
        """``bootstrap``: the ``--controller`` list (``controller.quorum.bootstrap.servers``);
        ``voters``: the ids of its entries where they are known (``controller.quorum.voters``)."""
        self.bootstrap = tuple(dict.fromkeys(a for a in bootstrap if a))
        if not self.bootstrap:
            raise ValueError("no controller address")
        self._ids: dict[str, int] = {address: node for node, address in (voters or {}).items()}
        self._named: dict[int, str] = {}  # the committed voter set's endpoints

    @property
    def named(self) -> dict[int, str]:
        """The endpoints the committed voter set names (id -> ``host:port``)."""
        return dict(self._named)

    def learn_voter_set(self, endpoints: Mapping[int, str]) -> bool:
        """The committed voter set names these endpoints now (a record naming none: every
        voter listens where the bootstrap list says). True when anything changed."""
        named = {int(node): str(address) for node, address in endpoints.items()}
        if named == self._named:
            return False
        self._named = named
        return True

    def answered(self, address: str, controller_id: object) -> None:
        """The controller at ``address`` said it is ``controller_id``."""
        if not isinstance(controller_id, int) or isinstance(controller_id, bool):
            return
        if address in self._ids or len(self._ids) < MAX_ANSWERED:
            self._ids[address] = controller_id

    def endpoint_of(self, controller_id: int) -> str | None:
        """Where controller ``controller_id`` listens, as far as this broker knows."""
        named = self._named.get(controller_id)
        if named is not None:
            return named
        return next((a for a in self.bootstrap if self._ids.get(a) == controller_id), None)

    def current(self, address: str) -> str:
        """Where a connection meant for ``address`` goes now: the voter set's endpoint of the
        controller known to have answered there, else ``address`` itself."""
        node = self._ids.get(address)
        moved = self._named.get(node) if node is not None else None
        return moved or address

    def addresses(self) -> tuple[str, ...]:
        """The controllers to try, in order: the bootstrap list with each entry whose
        controller moved replaced by its endpoint, then the voter set's other endpoints. Once
        the voter set names any, the entries whose controller is unknown come last: one of
        them may be a moved controller's old address (on a real network a dial to a host that
        went away waits out its timeout, not a refused connection)."""
        known = [self.current(a) for a in self.bootstrap if not self._named or a in self._ids]
        unknown = [a for a in self.bootstrap if self._named and a not in self._ids]
        named = [address for _, address in sorted(self._named.items())]
        return tuple(dict.fromkeys([*known, *named, *unknown]))

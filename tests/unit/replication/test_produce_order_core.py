"""replication/produce_order.py: a transactional producer's requests for one (topic,
partition, producer id) take their turns in the order they entered, whatever order the ones
ahead leave in; other keys never wait."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from floodmark.replication.produce_order import OrderKey, ProduceOrder

K: OrderKey = ("t", 0, 7)


def test_nothing_ahead_means_the_turn_is_now() -> None:
    order: ProduceOrder[str] = ProduceOrder()
    assert not order.holds([K])
    assert order.enter("a", [K]) is False
    assert order.holds([K]) and not order.waiting("a")
    assert order.leave("a") == []
    assert not order.holds([K]) and len(order) == 0


def test_the_later_ones_wait_and_go_one_at_a_time_in_entry_order() -> None:
    order: ProduceOrder[str] = ProduceOrder()
    order.enter("a", [K])  # asks the coordinator
    assert order.enter("b", [K]) and order.enter("c", [K])  # pipelined behind it
    assert order.waiting("b") and order.waiting("c")
    assert order.leave("a") == ["b"]  # c still waits for b (which may ask the coordinator)
    assert order.leave("b") == ["c"]
    assert order.leave("c") == []
    assert len(order) == 0 and not order.holds([K])


def test_other_producers_and_partitions_do_not_wait() -> None:
    order: ProduceOrder[str] = ProduceOrder()
    order.enter("a", [K])
    assert not order.holds([("t", 1, 7)]) and not order.holds([("t", 0, 8)])
    assert order.enter("b", [("t", 1, 7)]) is False


def test_a_request_of_two_partitions_waits_for_both_and_each_waits_for_it() -> None:
    order: ProduceOrder[str] = ProduceOrder()
    k2: OrderKey = ("t", 1, 7)
    order.enter("a", [K])
    order.enter("b", [k2])
    assert order.enter("ab", [K, k2])
    assert order.enter("after", [k2])
    assert order.leave("a") == []  # "ab" still waits for "b"
    assert order.leave("b") == ["ab"]
    assert order.leave("ab") == ["after"]


def test_one_given_up_while_waiting_lets_nobody_jump_the_queue() -> None:
    order: ProduceOrder[str] = ProduceOrder()
    order.enter("a", [K])
    order.enter("b", [K])
    order.enter("c", [K])
    assert order.leave("b") == []  # the connection closed: b leaves before its turn
    assert order.waiting("c")  # c still waits for a, which was ahead of b
    assert order.leave("a") == ["c"]
    assert order.leave("c") == [] and len(order) == 0


def test_leaving_twice_or_never_entered_changes_nothing() -> None:
    order: ProduceOrder[str] = ProduceOrder()
    order.enter("a", [K])
    order.enter("b", [K])
    assert order.leave("a") == ["b"]
    assert order.leave("a") == []
    assert order.leave("zz") == []
    assert not order.waiting("b") and len(order) == 1


@given(st.lists(st.tuples(st.sampled_from(["enter", "leave", "give_up"]), st.integers(0, 2),
                          st.integers(0, 5)), max_size=60))
def test_turns_come_in_entry_order_per_key_and_nobody_waits_for_good(
        steps: list[tuple[str, int, int]]) -> None:
    """Enter requests on three keys (one key each, as Produce v3+ carries one batch per
    partition), let any in their turn leave and any waiting give up: each key's turns come in
    entry order, at most one request per key is in its turn, and once all leave nothing is
    held."""
    order: ProduceOrder[int] = ProduceOrder()
    keys: dict[int, OrderKey] = {}
    entered: dict[OrderKey, list[int]] = {}
    turned: dict[OrderKey, list[int]] = {}
    in_turn: list[int] = []
    next_item = 0
    for action, k, pick in steps:
        if action == "enter":
            key: OrderKey = ("t", k, 7)
            keys[next_item] = key
            entered.setdefault(key, []).append(next_item)
            if not order.enter(next_item, [key]):
                in_turn.append(next_item)
                turned.setdefault(key, []).append(next_item)
            next_item += 1
        elif action == "give_up":
            waiting = [i for i in keys if order.waiting(i)]
            if waiting:
                item = waiting[pick % len(waiting)]
                assert order.leave(item) == []  # nobody's turn comes from one that waited
                entered[keys[item]].remove(item)
        elif in_turn:
            item = in_turn.pop(pick % len(in_turn))
            for later in order.leave(item):
                in_turn.append(later)
                turned.setdefault(keys[later], []).append(later)
        per_key = [keys[i] for i in in_turn]
        assert len(per_key) == len(set(per_key))  # one in its turn per key
    while in_turn:  # everyone in a turn leaves: every waiting one gets its turn
        for later in order.leave(in_turn.pop(0)):
            in_turn.append(later)
            turned.setdefault(keys[later], []).append(later)
    assert turned == entered
    assert len(order) == 0

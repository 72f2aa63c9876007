"""The collector pause around a round (`scheduler.collector`): off inside, restored after, and
counted when pauses overlap (rounds in several threads)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from scheduler import plan_round
from scheduler.collector import collector_paused
from tests.scheduler.builders import CORE, cluster, gang, node


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_back_on_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_switched_off_before_stays_off() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_it_comes_back_on_after_an_error_inside() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_overlapping_pauses_switch_it_on_only_when_the_last_ends() -> None:
    first_in, second_out = threading.Event(), threading.Event()
    seen: list[bool] = []

    def second() -> None:
        first_in.wait()
        with collector_paused():
            pass
        seen.append(gc.isenabled())  # the first pause still holds
        second_out.set()

    thread = threading.Thread(target=second)
    thread.start()
    with collector_paused():
        first_in.set()
        second_out.wait()
    thread.join()
    assert seen == [False]
    assert gc.isenabled()


def test_a_round_leaves_the_collector_as_it_found_it() -> None:
    snap = cluster().node(node("a").cpu(8)).submit(gang("ml/g", pods=1).cpu(4)).snapshot()
    assert plan_round(snap, CORE).placements
    assert gc.isenabled()
    gc.disable()
    plan_round(snap, CORE)
    assert not gc.isenabled()

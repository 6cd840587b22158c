# SPDX-License-Identifier: MIT
"""Keepalive: the library's thread renews the lease; on_lost runs when a holder stopped
past its lease resumes after a takeover."""
import ctypes
import multiprocessing
import os
import select
import signal
import threading
import time

import pytest

import fencelock
from fencelock import _native
from children import keepalive_holder
from conftest import wait_stopped


def test_keepalive_keeps_a_short_lease(region, other):
    lease = region.acquire("k", lease=0.1)
    with lease.keep_alive() as k:
        end = lease.deadline + 0.3  # well past the original deadline
        while time.monotonic() < end:
            with pytest.raises(fencelock.Busy):
                other.acquire("k", timeout=0)
        assert lease.check() and not k.lost and lease.deadline > time.monotonic()
    lease.release()
    other.acquire("k", timeout=0).release()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_on_lost_after_stop_and_takeover(daemon, method):  # I4
    ctx = multiprocessing.get_context(method)
    parent_end, child_end = ctx.Pipe()
    child = ctx.Process(target=keepalive_holder, args=(daemon.region, child_end))
    child.start()
    try:
        with fencelock.open(daemon.region) as r:
            assert parent_end.poll(30)
            what, token = parent_end.recv()
            assert what == "kept"
            os.kill(child.pid, signal.SIGSTOP)  # its keepalive thread stops too
            wait_stopped(child.pid)
            with r.acquire("kept", lease=10, timeout=10) as taker:
                assert taker.token > token and taker.expired_previous
                os.kill(child.pid, signal.SIGCONT)
                assert parent_end.poll(30)
                assert parent_end.recv() == ("lost", token, "OwnershipLost", "OwnershipLost",
                                             True, False)
    finally:
        os.kill(child.pid, signal.SIGCONT)
        child.join(30)
    assert child.exitcode == 0


def test_on_lost_runs_on_the_library_thread_and_may_stop_its_keepalive(region, other):
    seen = threading.Event()
    info = {}

    def on_lost(lease, error):
        info["main thread"] = threading.current_thread() is threading.main_thread()
        info["lease"], info["error"] = lease, error
        try:
            k.stop()  # its own keepalive, from its callback: allowed (issue 26)
        except fencelock.OwnershipLost as e:
            info["stop"] = e
        seen.set()

    lease = region.acquire("k", lease=0.03)  # renewed every 10 ms
    k = lease.keep_alive(on_lost=on_lost)
    fd = k.fileno()
    # Release behind the keepalive's back (the C call, not Lease.release(), which would
    # stop the keepalive first): its next renewal fails with ESTALE.
    assert _native.lib.fl_release(region._h, ctypes.byref(lease._c)) == 0
    assert seen.wait(10)
    assert info["main thread"] is False and info["lease"] is lease
    assert isinstance(info["error"], fencelock.OwnershipLost)
    assert isinstance(info["stop"], fencelock.OwnershipLost)
    assert k.lost and k._k is None
    k.stop()  # again: nothing
    with pytest.raises(ValueError):
        k.fileno()
    del fd
    # A keepalive for a lease that is not current is refused.
    other.acquire("k", timeout=0).release()
    with pytest.raises(fencelock.OwnershipLost):
        lease.keep_alive()


def test_on_lost_releasing_another_kept_lease_does_not_wedge_renewals(region, other):
    """Issue 26, defect 3: on_lost that releases another kept lease (which stops its
    keepalive) ran inside the keeper's RCU read section: the stop waited for a grace
    period that waited for the keeper, and no lease of the process was renewed again."""
    done = threading.Event()
    info = {}
    victim = region.acquire("victim", lease=0.03)
    released = region.acquire("released", lease=60)
    still = region.acquire("still", lease=0.3)
    kr = released.keep_alive()
    ks = still.keep_alive()

    def on_lost(lease, error):
        try:
            released.release()  # stops kr first, on the keeper thread
            info["released"] = True
        except Exception as e:  # noqa: BLE001 - reported to the test
            info["released"] = e
        done.set()

    kv = victim.keep_alive(on_lost=on_lost)
    first = still.deadline
    assert _native.lib.fl_release(region._h, ctypes.byref(victim._c)) == 0
    assert done.wait(20), "on_lost never finished: the keepalive thread is wedged"
    assert info["released"] is True and kr._k is None
    with other.acquire("released", timeout=0):  # free at once
        pass
    end = time.monotonic() + 20
    while still.deadline <= first + 0.05 and time.monotonic() < end:
        time.sleep(0.02)
    assert still.deadline > first + 0.05, "renewals stopped after the callback"
    assert still.check()
    with pytest.raises(fencelock.OwnershipLost):
        kv.stop()
    ks.stop()
    still.release()


def test_on_lost_may_close_the_region(daemon, other):
    r = fencelock.open(daemon.region)
    done = threading.Event()
    lease = r.acquire("k", lease=0.03)
    kept = r.acquire("kept", lease=60)
    kept.keep_alive()

    def on_lost(lease, error):
        r.close()  # stops every keepalive (this one included), then fl_close on the keeper
        done.set()

    lease.keep_alive(on_lost=on_lost)
    assert _native.lib.fl_release(r._h, ctypes.byref(lease._c)) == 0
    assert done.wait(20)
    assert r.closed
    # closed as if the process had died: the kept lease is free for the next holder
    assert other.acquire("kept", timeout=5).owner_died_previous


def test_close_stops_keepalives(daemon, other):
    r = fencelock.open(daemon.region)
    lease = r.acquire("k", lease=0.05)
    k = lease.keep_alive(on_lost=lambda *a: None)
    r.close()  # stops k, then releases as if the process had died
    assert k._k is None
    assert other.acquire("k", timeout=5).owner_died_previous

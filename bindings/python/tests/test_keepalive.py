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


def test_on_lost_runs_on_the_library_thread_and_stop_is_refused_there(region, other):
    seen = threading.Event()
    info = {}

    def on_lost(lease, error):
        info["main thread"] = threading.current_thread() is threading.main_thread()
        info["lease"], info["error"] = lease, error
        try:
            k.stop()
        except RuntimeError as e:
            info["stop"] = str(e)
        seen.set()

    lease = region.acquire("k", lease=0.03)  # renewed every 10 ms
    k = lease.keep_alive(on_lost=on_lost)
    # Release behind the keepalive's back (the C call, not Lease.release(), which would
    # stop the keepalive first): its next renewal fails with ESTALE.
    assert _native.lib.fl_release(region._h, ctypes.byref(lease._c)) == 0
    assert seen.wait(10)
    assert select.select([k], [], [], 10)[0] == [k]  # the eventfd says so too
    assert info["main thread"] is False and info["lease"] is lease
    assert isinstance(info["error"], fencelock.OwnershipLost) and "stop" in info["stop"]
    assert k.lost
    with pytest.raises(fencelock.OwnershipLost):
        k.stop()
    k.stop()  # again: nothing
    # A keepalive for a lease that is not current is refused.
    other.acquire("k", timeout=0).release()
    with pytest.raises(fencelock.OwnershipLost):
        lease.keep_alive()


def test_close_stops_keepalives(daemon, other):
    r = fencelock.open(daemon.region)
    lease = r.acquire("k", lease=0.05)
    k = lease.keep_alive(on_lost=lambda *a: None)
    r.close()  # stops k, then releases as if the process had died
    assert k._k is None
    assert other.acquire("k", timeout=5).owner_died_previous

# SPDX-License-Identifier: MIT
"""Ending waits: Cancel (fl_acquire_cancelable) from another thread, signals in the main
thread (Ctrl-C ends a timeout=None wait), and Deadlock (EDEADLK) for a wait on one's own
lease."""
import errno
import os
import signal
import threading
import time

import pytest

import fencelock


def later(seconds, fn, *args):
    t = threading.Timer(seconds, fn, args)
    t.start()
    return t


def test_cancel_from_another_thread_ends_a_wait_in_a_thread(region, other):
    with other.acquire("k", lease=30), fencelock.Cancel() as c:
        result = []

        def wait():
            t0 = time.monotonic()
            try:
                region.acquire("k", timeout=None, cancel=c)
            except fencelock.Cancelled as e:
                result.append((e, time.monotonic() - t0))

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(0.1)
        c.cancel()
        t.join(5)
        assert not t.is_alive()
        (e, took), = result
        assert e.errno == errno.ECANCELED and isinstance(e, fencelock.Error)
        assert took < 2 and c.cancelled


def test_cancel_from_a_thread_ends_a_wait_in_the_main_thread(region, other):
    with other.acquire("k", lease=30), fencelock.Cancel() as c:
        t0 = time.monotonic()
        later(0.1, c.cancel)
        with pytest.raises(fencelock.Cancelled):
            region.acquire("k", timeout=20, cancel=c)
        assert time.monotonic() - t0 < 2


def test_cancelled_before_the_wait_and_reset(region, other):
    with fencelock.Cancel() as c:
        c.cancel()
        assert c.cancelled
        with region.acquire("free", cancel=c) as lease:  # a free key is still acquired
            assert lease.token > 0
        with other.acquire("k", lease=30) as held:
            with pytest.raises(fencelock.Cancelled):  # sticky: ends the wait at once
                region.acquire("k", timeout=None, cancel=c)
            c.reset()
            assert not c.cancelled
            with pytest.raises(fencelock.Busy):
                region.acquire("k", timeout=0.05, cancel=c)
            t = later(0.1, held.release)
            with region.acquire("k", timeout=10, cancel=c) as lease:
                assert lease.token > held.token
            # The wait ends at the release's CAS, before the timer thread has
            # marked held released: wait for it, or leaving the block would
            # release held a second time (ESTALE).
            t.join()
    assert "closed" in repr(c)
    c.cancel()  # after close: nothing
    with pytest.raises(ValueError):
        region.acquire("k", cancel=c)
    with pytest.raises(TypeError):
        region.acquire("k", cancel=object())


def test_sigint_ends_a_wait_forever_with_keyboard_interrupt(region, other):
    with other.acquire("k", lease=30):
        t0 = time.monotonic()
        later(0.2, os.kill, os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            region.acquire("k", timeout=None)
        assert time.monotonic() - t0 < 5
    # nothing is held: the key is free for the next one
    with region.acquire("k", timeout=0):
        pass


def test_a_handler_that_returns_lets_the_wait_go_on(region, other):
    seen = []
    old = signal.signal(signal.SIGUSR1, lambda *_: seen.append(time.monotonic()))
    try:
        held = other.acquire("k", lease=30)
        later(0.1, os.kill, os.getpid(), signal.SIGUSR1)
        later(0.4, held.release)
        with region.acquire("k", timeout=10) as lease:
            assert seen and lease.token > held.token
            assert not lease.expired_previous
        # a timed wait keeps its deadline across the handler
        with other.acquire("k", lease=30):
            later(0.1, os.kill, os.getpid(), signal.SIGUSR1)
            t0 = time.monotonic()
            with pytest.raises(fencelock.Busy) as e:
                region.acquire("k", timeout=0.5)
            assert e.value.errno == errno.ETIMEDOUT and 0.4 < time.monotonic() - t0 < 3
            assert len(seen) == 2
    finally:
        signal.signal(signal.SIGUSR1, old)


def test_the_previous_wakeup_fd_still_sees_signals(region, other):
    r, w = os.pipe2(os.O_NONBLOCK)
    old_handler = signal.signal(signal.SIGUSR1, lambda *_: None)
    old_fd = signal.set_wakeup_fd(w)
    try:
        held = other.acquire("k", lease=30)
        later(0.1, os.kill, os.getpid(), signal.SIGUSR1)
        later(0.3, held.release)
        with region.acquire("k", timeout=10):
            pass
        assert signal.set_wakeup_fd(old_fd) == w  # restored after the wait
        assert os.read(r, 16) == bytes([signal.SIGUSR1])  # and passed on
    finally:
        signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGUSR1, old_handler)
        os.close(r)
        os.close(w)


def test_deadlock_for_a_wait_on_ones_own_lease(region, other):
    with region.acquire("k", lease=30) as lease:
        with pytest.raises(fencelock.Deadlock) as e:
            region.acquire("k", timeout=None)
        assert e.value.errno == errno.EDEADLK and isinstance(e.value, fencelock.Error)
        assert "k" in str(e.value)
        with pytest.raises(fencelock.Busy):  # a try still says EBUSY
            region.acquire("k", timeout=0)
        with pytest.raises(fencelock.Busy):  # another handle waits as always
            other.acquire("k", timeout=0.05)
        assert lease.check()

# SPDX-License-Identifier: MIT
"""fencelock.aio: a wait never blocks the event loop (a ticking task keeps ticking while
a real held key is waited for), task.cancel() and asyncio.wait_for() end a wait at once
leaving nothing held (also when the key came free at the moment of the cancel), Ctrl-C
under asyncio.run in a real child process, and an etcd region whose every call runs off
the loop.

"Nothing held" is checked the way a leaked wait would show: the key's waiter count is 0
while its holder still holds it, and once the holder releases, the key is free and
another handle's try (timeout 0) takes it."""
import asyncio
import errno
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

import fencelock
import fencelock.aio
from fencelock.aio import AsyncLease, AsyncRegion

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(fencelock.__file__)))
LOCK_FREE = 0


def lock_info(region, key):
    for info in region.locks():
        if info.key == key:
            return info
    return None


def waiters(region, key):
    info = lock_info(region, key)
    return 0 if info is None else info.waiters


def assert_free(region, key):
    """The key is free and a try from region takes it (then gives it back)."""
    assert lock_info(region, key).state == LOCK_FREE
    region.acquire(key, timeout=0).release()


async def until(cond, what, timeout=20.0):
    """Poll cond on the loop without blocking it (a condition, not a sleep race)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


class Ticker:
    """A task that counts every couple of milliseconds: it ticks only while the loop
    runs."""

    def __init__(self):
        self.ticks = 0
        self.task = asyncio.create_task(self._run())

    async def _run(self):
        while True:
            await asyncio.sleep(0.002)
            self.ticks += 1

    async def wait_ticks(self, n, pending):
        """n more ticks while the task pending is still pending."""
        start = self.ticks
        await until(lambda: self.ticks >= start + n, f"{n} ticks")
        assert not pending.done(), "the call was expected to still wait"

    def stop(self):
        self.task.cancel()


async def start_wait(r, ticker_region, key, **kw):
    """A task waiting in r.acquire(key) for a key held elsewhere, once it sleeps in the
    library's wait (the key's waiter count says so)."""
    before = waiters(ticker_region, key)
    t = asyncio.create_task(r.acquire(key, **kw))
    await until(lambda: waiters(ticker_region, key) > before or t.done(), "the wait")
    assert not t.done()
    return t


def run(coro):
    return asyncio.run(coro)


# -- shared memory ----------------------------------------------------------------


def test_a_wait_does_not_block_the_loop(daemon, other):
    held = other.acquire("k", lease=30)

    async def main():
        async with fencelock.aio.open(daemon.region) as r:
            assert isinstance(r, AsyncRegion) and r.path == daemon.region and r.registered
            ticker = Ticker()
            t = await start_wait(r, other, "k", lease=10, timeout=60)
            await ticker.wait_ticks(25, t)  # the loop runs while acquire waits
            held.release()
            lease = await t
            assert isinstance(lease, AsyncLease)
            assert lease.token > held.token and lease.key == "k"
            assert 9 < lease.remaining() <= 10 and lease.deadline > time.monotonic()
            assert not lease.expired_previous and not lease.owner_died_previous
            assert await lease.check()
            await lease.release()
            assert not await lease.check()
            ticker.stop()

    run(main())
    assert_free(other, "k")


def test_task_cancel_ends_a_wait_at_once_and_nothing_is_held(daemon, other):
    held = other.acquire("k", lease=30)

    async def main():
        async with fencelock.aio.open(daemon.region) as r:
            t = await start_wait(r, other, "k", timeout=None)
            t0 = time.monotonic()
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            assert time.monotonic() - t0 < 2
            assert waiters(other, "k") == 0  # no thread goes on waiting
            assert held.check()
            held.release()
            assert_free(other, "k")  # nobody took it, while r is still open

    run(main())


def test_wait_for_and_timeout_end_a_wait_with_nothing_held(daemon, other):
    held = other.acquire("k", lease=30)

    async def main():
        async with fencelock.aio.open(daemon.region) as r:
            ticker = Ticker()
            t0 = time.monotonic()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(r.acquire("k", timeout=None), 0.2)
            assert 0.15 < time.monotonic() - t0 < 5 and ticker.ticks > 0
            assert waiters(other, "k") == 0
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.1):
                    await r.acquire("k", timeout=30)
            assert waiters(other, "k") == 0
            # the library's own timeout: Busy (ETIMEDOUT), and a try: Busy (EBUSY)
            with pytest.raises(fencelock.Busy) as e:
                await r.acquire("k", timeout=0.05)
            assert e.value.errno == errno.ETIMEDOUT
            with pytest.raises(fencelock.Busy) as e:
                await r.acquire("k", timeout=0)
            assert e.value.errno == errno.EBUSY
            held.release()
            assert_free(other, "k")
            ticker.stop()

    run(main())


def test_a_cancel_after_the_thread_acquired_releases_that_lease(daemon, other):
    """The race, made certain: the waiting thread takes the key, and the task is cancelled
    before the loop has handed it the lease."""
    async def main():
        async with fencelock.aio.open(daemon.region) as r:
            for _ in range(5):
                held = other.acquire("k", lease=30)
                t = await start_wait(r, other, "k", timeout=None)
                held.release()
                # Block the loop (no await) until the thread has acquired: its lease is
                # on its way to the loop, which cannot take it yet.
                deadline = time.monotonic() + 20
                while lock_info(other, "k").token == held.token:
                    assert time.monotonic() < deadline
                taken = lock_info(other, "k")
                assert taken.state != LOCK_FREE
                t.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await t
                info = lock_info(other, "k")
                assert info.state == LOCK_FREE and info.token == taken.token
                assert info.releases >= 1 and info.last_release == 0  # released, not voided
                assert_free(other, "k")

    run(main())


def test_cancels_racing_releases_leave_nothing_held(daemon, other):
    """Release and cancel in the same loop step, many times: the thread either sees the
    cancel first (Cancelled) or the key first (then its lease is released); either way
    the key is free when CancelledError arrives."""
    async def main():
        took = 0
        async with fencelock.aio.open(daemon.region) as r:
            for _ in range(60):
                held = other.acquire("k", lease=30)
                t = await start_wait(r, other, "k", timeout=None)
                before = lock_info(other, "k").acquisitions
                held.release()
                t.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await t
                took += lock_info(other, "k").acquisitions - before
                assert waiters(other, "k") == 0
                assert_free(other, "k")
        return took

    took = run(main())
    print(f"the waiting thread took the key before the cancel in {took} of 60 cycles")


def test_a_wait_closed_without_being_awaited_leaves_nothing_held(daemon, other):
    """A coroutine closed at its await (GeneratorExit: a task destroyed) cannot wait for
    the thread: it cancels the wait, and a lease the thread took is released anyway."""
    async def main():
        async with fencelock.aio.open(daemon.region) as r:
            for race in (False, True):
                held = other.acquire("k", lease=30)
                coro = r.acquire("k", timeout=None)
                coro.send(None)  # to its first await: the wait is in its thread
                await until(lambda: waiters(other, "k") > 0, "the wait")
                if race:
                    held.release()
                    await until(lambda: lock_info(other, "k").token != held.token,
                                "the thread's acquisition")
                coro.close()
                await until(lambda: waiters(other, "k") == 0, "the end of the wait")
                if not race:
                    assert lock_info(other, "k").state != LOCK_FREE
                    held.release()
                await until(lambda: lock_info(other, "k").state == LOCK_FREE, "a free key")
                assert_free(other, "k")

    run(main())


def test_a_wait_whose_loop_is_closed_leaves_nothing_held(daemon, other):
    """The loop closed under a pending wait (no task cancelled it): the thread, which
    cannot hand its lease to the loop, releases it."""
    held = other.acquire("k", lease=30)
    r = fencelock.aio.AsyncRegion(daemon.region)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(r)
        task = loop.create_task(r.acquire("k", timeout=None))
        loop.run_until_complete(until(lambda: waiters(other, "k") > 0, "the wait"))
    finally:
        loop.close()
    held.release()
    deadline = time.monotonic() + 20
    while not (lock_info(other, "k").token != held.token
               and lock_info(other, "k").state == LOCK_FREE):
        assert time.monotonic() < deadline, "the thread's lease was not released"
        time.sleep(0.001)
    assert_free(other, "k")
    assert not task.done()  # asyncio logs "Task was destroyed but it is pending": the misuse
    r.region.close()


def test_async_with_releases_the_lease(daemon, other):
    class Boom(Exception):
        pass

    async def main():
        async with fencelock.aio.open(daemon.region) as r:
            async with await r.acquire("k") as lease:
                assert await lease.check()
                with pytest.raises(fencelock.Busy):
                    other.acquire("k", timeout=0)
            assert not await lease.check()
            assert_free(other, "k")
            with pytest.raises(Boom):
                async with await r.acquire("k"):
                    raise Boom()
            assert_free(other, "k")
            # a lease lost in the block: the failed release is a note, not the exception
            with pytest.raises(Boom) as e:
                async with await r.acquire("k", lease=0.05) as lost:
                    taker = other.acquire("k", lease=30, timeout=10)
                    raise Boom()
            notes = getattr(e.value, "__notes__", [])
            assert len(notes) == 1 and "ESTALE" in notes[0] and str(lost.token) in notes[0]
            taker.release()

    run(main())


def test_commit_read_and_a_stale_fence(daemon, other):
    async def main():
        async with fencelock.aio.open(daemon.region) as r:
            a = await r.acquire("job", lease=0.2)
            assert await r.commit(a, "job/out", b"from A") == a.token
            assert await r.read("job/out") == (b"from A", a.token)
            assert await r.commit_u64(a, "job/ptr", 42) == a.token
            assert await r.read_u64("job/ptr") == (42, a.token)
            await a.renew(0.2)
            # A pauses past its lease; B takes the key over and commits
            b = other.acquire("job", lease=30, timeout=10)
            assert b.expired_previous and b.token > a.token
            other.commit(b, "job/out", b"from B")
            with pytest.raises(fencelock.StaleFence) as e:
                await r.commit(a, "job/out", bytearray(b"late A"))
            assert e.value.token == a.token and e.value.accepted == b.token
            assert await r.read("job/out") == (b"from B", b.token)
            with pytest.raises(fencelock.OwnershipLost):
                await a.renew()
            with pytest.raises(fencelock.OwnershipLost):
                await a.release()
            assert await r.commit_token("job", b.token, "job/out", b"by token") == b.token
            with pytest.raises(fencelock.NotFound):
                await r.read("never")
            b.release()

    run(main())


def test_a_wait_by_the_holding_task_is_a_deadlock_another_task_waits(daemon, other):
    async def main():
        async with fencelock.aio.open(daemon.region) as r:
            lease = await r.acquire("k", lease=30)
            t0 = time.monotonic()
            with pytest.raises(fencelock.Deadlock) as e:
                await r.acquire("k", timeout=None)
            assert e.value.errno == errno.EDEADLK and time.monotonic() - t0 < 2
            with pytest.raises(fencelock.Busy):  # a try still says Busy
                await r.acquire("k", timeout=0)
            assert await lease.check()
            # another task of the same AsyncRegion waits for it, as another thread would
            t = await start_wait(r, other, "k", timeout=30)
            await lease.release()
            got = await t
            assert got.token > lease.token
            # the other task's lease is waited for: Busy at the timeout, not Deadlock
            with pytest.raises(fencelock.Busy) as e:
                await r.acquire("k", timeout=0.05)
            assert e.value.errno == errno.ETIMEDOUT
            await got.release()
            async with await r.acquire("k", timeout=5) as again:
                assert again.token > got.token and not await lease.check()
            # after a release through the sync Lease: no deadlock
            mine = await r.acquire("k")
            mine.lease.release()
            async with await r.acquire("k", timeout=5):
                pass
            # a resolved Key is the same key
            key = await r.resolve("k")
            async with await r.acquire(key, timeout=0):
                with pytest.raises(fencelock.Deadlock):
                    await r.acquire("k", timeout=1)

    run(main())


def test_waits_of_two_tasks_on_one_key_in_turn(daemon, other):
    """Each wait runs in a thread of its own: a pool's thread that took the key for task
    A would get Deadlock (EDEADLK: the library's rule is per thread) for task B's wait."""
    async def main():
        async with fencelock.aio.open(daemon.region) as r:
            held = other.acquire("k", lease=30)
            a = await start_wait(r, other, "k", timeout=30)
            held.release()
            prev = await a
            for _ in range(20):
                b = await start_wait(r, other, "k", timeout=30)
                await prev.release()
                prev = await b
                assert await prev.check()
            await prev.release()
            assert_free(other, "k")

    run(main())


def test_close_ends_a_wait_in_flight(daemon, other):
    held = other.acquire("k", lease=30)

    async def main():
        r = await fencelock.aio.open(daemon.region)
        t = await start_wait(r, other, "k", timeout=None)
        t0 = time.monotonic()
        await r.close()
        assert r.closed and t.done() and time.monotonic() - t0 < 5
        with pytest.raises(ValueError, match="closed"):
            await t
        assert waiters(other, "k") == 0
        await r.close()  # again: nothing
        with pytest.raises(ValueError, match="closed"):
            await r.acquire("k", timeout=0)
        with pytest.raises(ValueError, match="closed"):
            await r.read("x")

    run(main())
    held.release()
    assert_free(other, "k")


def test_open_and_misuse(daemon, tmp_path):
    async def main():
        r = fencelock.aio.open(daemon.region)
        with pytest.raises(ValueError, match="not open yet"):
            await r.acquire("k")
        assert await r is r  # opened by await
        async with r:  # and usable in async with, which closes it
            lease = await r.acquire("k", timeout=0)
            with pytest.raises(ValueError):
                await r.acquire("other", timeout=-1)
            with pytest.raises(TypeError):
                await r.acquire(42)
        assert r.closed
        with pytest.raises(ValueError, match="closed"):
            await lease.release()
        with pytest.raises(ValueError):
            await r  # closed: a new open() opens again
        with pytest.raises(fencelock.Error):
            await fencelock.aio.open(str(tmp_path / "no" / "such" / "region"))
        async with fencelock.aio.open(daemon.region, readonly=True) as ro:
            assert ro.readonly
            with pytest.raises(fencelock.Error) as e:
                await ro.acquire("k", timeout=0)
            assert e.value.errno == errno.EINVAL

    run(main())


# -- Ctrl-C ---------------------------------------------------------------------

CHILD = r"""
import asyncio, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever the parent ignored
import fencelock.aio

kept = []


async def main():
    r = await fencelock.aio.open(sys.argv[1])
    kept.append(r)  # open past asyncio.run: a lease a thread took would still be held
    print("open", flush=True)
    await r.acquire("k", timeout=None)
    print("acquired", flush=True)

try:
    asyncio.run(main())
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.stdin.readline()  # the parent looks at the key while this handle is open
    raise
"""


def read_line(proc, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("the child said nothing in time")
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            return proc.stdout.readline().decode().strip()


def test_ctrl_c_ends_a_wait_under_asyncio_run(daemon, other):
    held = other.acquire("k", lease=60)
    env = dict(os.environ, PYTHONPATH=PACKAGE_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", CHILD, daemon.region], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        assert read_line(child) == "open"
        deadline = time.monotonic() + 20
        while waiters(other, "k") == 0:  # the child sleeps in the library's wait
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.001)
        t0 = time.monotonic()
        child.send_signal(signal.SIGINT)
        assert read_line(child) == "interrupted"  # the first Ctrl-C
        assert time.monotonic() - t0 < 5
        assert waiters(other, "k") == 0
        held.release()
        assert_free(other, "k")  # while the child's handle is still open
        child.stdin.write(b"\n")
        child.stdin.flush()
        _, err = child.communicate(timeout=20)
        assert child.returncode == -signal.SIGINT, err.decode()
        assert b"KeyboardInterrupt" in err
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


# -- etcd -------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def all_threads_stopped(pid, timeout=10.0):
    """Until every thread of pid is stopped (SIGSTOP stops a Go program's threads one by
    one: a request sent before the last has stopped may still be answered)."""
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                continue  # the thread ended
        if states and all(st in ("T", "t") for st in states):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"etcd {pid} did not stop: {states}")
        time.sleep(0.001)


class Etcd:
    """One etcd member on loopback ports, its data in a test directory."""

    def __init__(self, directory):
        binary = shutil.which("etcd")
        if binary is None:
            pytest.fail("etcd not found (Debian: etcd-server)")
        self.port, peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{peer}"
        self.log = open(os.path.join(directory, "etcd.log"), "ab")
        self.proc = subprocess.Popen(
            [binary, "--name", "m0", "--data-dir", os.path.join(directory, "etcd-data"),
             "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", f"m0={peer_url}"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while not self._ready():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                pytest.fail("etcd did not get ready")
            time.sleep(0.02)  # polling a condition
        self.region = f"etcd://127.0.0.1:{self.port}/aio"

    def _ready(self):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v3/kv/range",
                                     data=b'{"key":"AA=="}', method="POST")
        try:
            with urllib.request.urlopen(req, timeout=2) as reply:
                return reply.status == 200
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture
def etcd(tmp_path, monkeypatch):
    monkeypatch.setenv("FENCELOCK_ETCD_TIMEOUT_MS", "30000")  # generous: a member is stopped
    e = Etcd(tmp_path)
    yield e
    e.stop()


def test_etcd_every_call_is_off_the_loop(etcd):
    with fencelock.open(etcd.region) as sync:
        async def main():
            async with fencelock.aio.open(etcd.region) as r:
                assert r.path.startswith("etcd://") and not r.registered
                assert r.backend == "etcd"
                ticker = Ticker()
                lease = await r.acquire("job", lease=5, timeout=0)
                assert await r.commit(lease, "job/out", b"v1") == lease.token

                async def stopped_member(call):
                    """call() while the etcd member is stopped: the loop goes on ticking."""
                    etcd.proc.send_signal(signal.SIGSTOP)
                    try:
                        all_threads_stopped(etcd.proc.pid)  # else it may answer first
                        t = asyncio.create_task(call())
                        await ticker.wait_ticks(25, t)
                    finally:
                        etcd.proc.send_signal(signal.SIGCONT)
                    return await t

                assert await stopped_member(lambda: r.read("job/out")) == (b"v1", lease.token)
                assert await stopped_member(
                    lambda: r.commit(lease, "job/out", b"v2")) == lease.token
                await stopped_member(lambda: lease.renew(5))
                assert await stopped_member(lease.check)
                await stopped_member(lease.release)
                got = await stopped_member(lambda: r.acquire("job", lease=5, timeout=0))
                assert got.token > lease.token
                await got.release()

                # a wait on a key held by another handle: cancelled, nothing held
                held = sync.acquire("job", lease=30, timeout=0)
                t = asyncio.create_task(r.acquire("job", timeout=None))
                await ticker.wait_ticks(25, t)
                t0 = time.monotonic()
                t.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await t
                assert time.monotonic() - t0 < 5
                held.release()
                sync.acquire("job", timeout=0).release()  # free: nobody took it
                ticker.stop()

            # close is off the loop too: a stopped member does not stop the loop
            r = await fencelock.aio.open(etcd.region)
            await r.acquire("held-at-close", lease=5, timeout=0)
            ticker = Ticker()
            etcd.proc.send_signal(signal.SIGSTOP)
            try:
                t = asyncio.create_task(r.close())
                await ticker.wait_ticks(25, t)
            finally:
                etcd.proc.send_signal(signal.SIGCONT)
            await t
            ticker.stop()

        run(main())

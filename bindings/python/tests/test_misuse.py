# SPDX-License-Identifier: MIT
"""Misuse from Python (issue 26, defects 1, 2, 4-9): each is refused with the exception a
Python programmer expects, before ctypes can turn it into something else."""
import gc
import subprocess
import sys
import os
import signal
import threading
import time
import warnings

import pytest

import fencelock
from conftest import Daemon


def _wait_for_waiter(r, key, seconds=20):
    """Until a wait on key is under way (the lock's waiters count), not a sleep race."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if any(lk.key == key and lk.waiters > 0 for lk in r.locks()):
            return
        time.sleep(0.005)
    raise AssertionError(f"no waiter on {key!r}")


# 1 -------------------------------------------------------------------------------------

def test_close_ends_a_wait_in_another_thread_with_closed(daemon, other):
    r = fencelock.open(daemon.region)
    held = other.acquire("busy", lease=60)
    out = {}

    def waiter():
        try:
            r.acquire("busy", lease=5, timeout=None)
            out["result"] = "acquired"
        except BaseException as e:  # noqa: BLE001 - reported to the test
            out["result"] = e

    t = threading.Thread(target=waiter)
    t.start()
    _wait_for_waiter(other, "busy")
    r.close()  # returns once the wait has ended
    t.join(20)
    assert not t.is_alive()
    assert isinstance(out["result"], fencelock.Closed)
    assert isinstance(out["result"], ValueError)  # as a closed file's operations
    assert r.closed
    held.release()
    with pytest.raises(fencelock.Closed):
        r.acquire("busy", timeout=0)


def test_close_from_a_signal_handler_ends_the_main_threads_wait(daemon, other):
    r = fencelock.open(daemon.region)
    held = other.acquire("busy", lease=60)

    def handler(signum, frame):
        r.close()  # inside the main thread's acquire(): its end does the C close

    old = signal.signal(signal.SIGUSR1, handler)
    t = threading.Thread(target=lambda: (_wait_for_waiter(other, "busy"),
                                         os.kill(os.getpid(), signal.SIGUSR1)))
    try:
        t.start()
        with pytest.raises(fencelock.Closed):
            r.acquire("busy", lease=5, timeout=30)
    finally:
        t.join(20)
        signal.signal(signal.SIGUSR1, old)
    assert r.closed
    held.release()


def test_close_while_threads_hammer_the_region(daemon):
    """Calls racing with close() end with Closed (or succeed before it), never crash."""
    r = fencelock.open(daemon.region)
    errors = []
    start = threading.Barrier(5)

    def worker(i):
        start.wait()
        try:
            while True:
                with r.acquire(f"k{i % 2}", lease=5, timeout=5) as lease:
                    r.commit(lease, f"k{i % 2}/rec", b"x")
        except fencelock.Closed:
            return
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    start.wait()
    time.sleep(0.05)  # let them run a little; the outcome does not depend on it
    r.close()
    for t in threads:
        t.join(20)
        assert not t.is_alive()
    assert errors == []


# 2 -------------------------------------------------------------------------------------

def test_a_lease_of_another_region_is_refused(tmp_path):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    da, db = Daemon(a_dir), Daemon(b_dir)
    try:
        with fencelock.open(da.region) as a, fencelock.open(db.region) as b:
            with b.acquire("job", lease=60) as real:  # the real holder, in region b
                b.commit(real, "job/state", b"real")
                foreign = a.acquire("job", lease=60)  # never held job in b
                for commit in (lambda: b.commit(foreign, "job/state", b"forged"),
                               lambda: b.commit_u64(foreign, "job/state", 7)):
                    with pytest.raises(ValueError, match="another Region"):
                        commit()
                assert b.read("job/state") == (b"real", real.token)
                foreign.release()
    finally:
        da.stop()
        db.stop()


def test_a_lease_of_another_handle_of_the_same_file_is_refused(daemon, region, other):
    mine = other.acquire("job", lease=60)
    with pytest.raises(ValueError, match="another Region"):
        region.commit(mine, "job/state", b"x")
    mine.release()


# 4 -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["job\0A", b"job\0A", bytearray(b"\0")])
def test_nul_in_a_name_is_refused(region, name):
    with pytest.raises(ValueError, match="NUL"):
        region.acquire(name, timeout=0)
    with region.acquire("job", timeout=0) as lease:
        with pytest.raises(ValueError, match="NUL"):
            region.commit(lease, name, b"x")
    with pytest.raises(ValueError, match="NUL"):
        region.read(name)
    with pytest.raises(ValueError, match="NUL"):
        region.resolve(name)
    assert [lk.key for lk in region.locks()] == ["job"]  # "job" only: nothing was cut


def test_nul_in_a_region_path_is_refused(daemon):
    with pytest.raises(ValueError, match="NUL"):
        fencelock.open(daemon.region + "\0ignored")


# 5 -------------------------------------------------------------------------------------

def test_durations_out_of_range_are_refused(region):
    year = 365.25 * 86400
    for bad in (584 * year, fencelock.SECONDS_MAX + 1, float("inf"), float("nan"), -1, 0):
        with pytest.raises(ValueError, match="lease"):
            region.acquire("k", lease=bad, timeout=0)
    with pytest.raises(ValueError, match=str(fencelock.SECONDS_MAX)):
        region.acquire("k", lease=584 * year, timeout=0)
    for bad in (584 * year, -0.5, float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            region.acquire("k", lease=1, timeout=bad)
    with pytest.raises(TypeError):
        region.acquire("k", lease="5", timeout=0)
    assert region.locks() == []  # nothing was tried


def test_numbers_out_of_range_are_refused(region):
    with region.acquire("k", timeout=0) as lease:
        for bad in (-1, 1 << 64):
            with pytest.raises(ValueError, match="2\\^64-1"):
                region.commit_u64(lease, "k/n", bad)
        region.commit_u64(lease, "k/n", (1 << 64) - 1)
        assert region.read_u64("k/n") == ((1 << 64) - 1, lease.token)
        with pytest.raises(ValueError, match=str(fencelock.TOKEN_MAX)):
            region.commit_token("k", 1 << 63, "k/n", b"x")


# 6 -------------------------------------------------------------------------------------

def test_a_region_dropped_unclosed_is_closed_with_a_resource_warning(tmp_path):
    d = Daemon(tmp_path, extra=("--clients", "4"))
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", ResourceWarning)
            for _ in range(20):  # five times the supervisor's client table
                fencelock.open(d.region).acquire("k", lease=60, timeout=5)
                gc.collect()
        assert sum(issubclass(w.category, ResourceWarning) for w in seen) == 20
        assert "unclosed" in str(next(w for w in seen if w.category is ResourceWarning).message)
        with fencelock.open(d.region) as r:  # a client slot is free: registered
            assert r.registered
            assert r.acquire("k", timeout=0).owner_died_previous  # closed as if it died
    finally:
        d.stop()


# 7 -------------------------------------------------------------------------------------

def test_commit_takes_bytes_like_objects_only(region):
    with region.acquire("k", timeout=0) as lease:
        for bad in (5, "text", None, 1.5, [1, 2]):
            with pytest.raises(TypeError, match="bytes-like"):
                region.commit(lease, "k/rec", bad)
        with pytest.raises(fencelock.NotFound):
            region.read("k/rec")  # nothing was written by the refused calls
        for good in (b"ab", bytearray(b"ab"), memoryview(b"xab")[1:]):
            region.commit(lease, "k/rec", good)
            assert region.read("k/rec")[0] == b"ab"


# 8 -------------------------------------------------------------------------------------

def test_names_from_locks_round_trip_to_acquire(region):
    with region.acquire(b"raw\xff", timeout=0) as lease:
        region.commit(lease, b"rec\xfe", b"v")
        (info,) = region.locks()
        assert info.key == "raw\udcff"
        assert region.records()[0].name == "rec\udcfe"
        with pytest.raises(fencelock.Busy):  # the same lock, by the name locks() gave
            region.acquire(info.key, timeout=0)
        assert region.read("rec\udcfe") == (b"v", lease.token)
    with region.acquire("raw\udcff", timeout=0) as again:
        assert again.token > lease.token


# 9 -------------------------------------------------------------------------------------

def test_a_refused_renew_changes_nothing(region):
    lease = region.acquire("k", lease=60, timeout=0)
    for bad in (-1, 0, float("nan"), 10**12):
        with pytest.raises(ValueError):
            lease.renew(bad)
    lease.renew()  # the acquired length still
    assert 55 < lease.remaining() <= 60
    with pytest.raises(ValueError):
        lease.keep_alive(lease=-1)
    with lease.keep_alive():
        pass
    lease.release()


def test_info_fields_are_enums(region, other):
    with region.acquire("k", timeout=0) as lease:
        (info,) = other.locks()
        assert info.state is fencelock.LockState.HELD and info.state == 1
        region.commit(lease, "k/r", b"x")
    assert other.locks()[0].state is fencelock.LockState.FREE
    assert other.info().run_state is fencelock.RunState.STARTED
    assert fencelock.LockState(7).name == "UNKNOWN_7"  # a newer library's value is kept


def test_close_races_with_keepalive_stops_and_reads(daemon):
    """close() stops every keepalive while other threads stop them too and read their
    deadlines: a stop in flight holds the C close off, a read never sees a freed one."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.0001)  # interleave the threads as finely as the GIL allows
    try:
        _close_racing_keepalives(daemon)
    finally:
        sys.setswitchinterval(old)


def _close_racing_keepalives(daemon):
    for _ in range(1000):  # the window is a few instructions wide: many rounds (5-10 s)
        r = fencelock.open(daemon.region)
        leases = [r.acquire(f"k{i}", lease=5, timeout=0) for i in range(4)]
        kas = [lease.keep_alive() for lease in leases]
        stop, go = threading.Event(), threading.Event()
        errors = []

        def reader(lease, ka):
            while not stop.is_set():
                assert lease.deadline > 0
                ka.lost
                try:
                    ka.fileno()
                except ValueError:
                    pass  # stopped

        def stopper(ka):
            go.wait()
            try:
                ka.stop()
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=reader, args=(leases[i], kas[i])) for i in range(2)]
        ts += [threading.Thread(target=stopper, args=(kas[i],)) for i in range(2, 4)]
        for t in ts:
            t.start()
        go.set()
        r.close()
        stop.set()
        for t in ts:
            t.join(20)
        assert errors == []


def test_exit_with_a_daemon_thread_waiting_on_an_unclosed_region(daemon, other):
    """At interpreter exit a collected Region cannot wait for a daemon thread's call (it
    never runs again): the process exits, and its locks go as a death's."""
    held = other.acquire("busy", lease=60)
    code = ("import sys, threading, fencelock\n"
            "r = fencelock.open(sys.argv[1])\n"
            "mine = r.acquire('mine', lease=60, timeout=0)\n"
            "t = threading.Thread(target=r.acquire, args=('busy', 5, None), daemon=True)\n"
            "t.start()\n"
            "print('waiting', flush=True)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(fencelock.__file__)))
    p = subprocess.Popen([sys.executable, "-c", code, daemon.region], stdout=subprocess.PIPE,
                         text=True, env=env)
    assert p.stdout.readline() == "waiting\n"
    assert p.wait(30) == 0
    held.release()
    assert other.acquire("mine", timeout=10).owner_died_previous


def test_keep_alive_started_while_another_thread_closes(daemon):
    """A keep_alive() that is the last call in flight when close() runs: stopped before
    the C close frees it, never left holding a freed keepalive (hostile review)."""
    for rnd in range(200):
        r = fencelock.open(daemon.region)
        kas = []

        def worker():
            try:
                for i in range(100):
                    kas.append(r.acquire(f"k{i}", lease=30, timeout=0).keep_alive())
            except fencelock.Closed:
                pass

        t = threading.Thread(target=worker)
        t.start()
        time.sleep((rnd % 10) * 0.0003)  # vary where close() lands
        r.close()
        t.join(20)
        assert [k for k in kas if k._k is not None] == []
        for k in kas:
            k.stop()  # already stopped: nothing, no freed memory read
            assert k.lost is False


def test_every_lost_keepalive_says_so_after_close_from_on_lost(daemon, other):
    r = fencelock.open(daemon.region)
    leases = [r.acquire(f"lost{i}", lease=0.3, timeout=0) for i in range(3)]  # renewed at 0.1 s
    closed = threading.Event()

    def on_lost(lease, error):
        r.close()  # the others' callbacks are skipped: the Region is gone
        closed.set()

    kas = [lease.keep_alive(on_lost=on_lost) for lease in leases]
    for lease in leases:  # behind the keepalives' backs: every renewal fails
        assert fencelock._native.lib.fl_release(r._h, lease._c) == 0
    assert closed.wait(20)
    assert r.closed
    assert [k.lost for k in kas] == [True, True, True]
    assert all(isinstance(k.error, fencelock.OwnershipLost) for k in kas)


def test_a_str_subclass_names_its_text(region, other):
    """class Job(str, Enum): its __str__ is "Job.RENDER", its text "render"."""
    import enum

    class Job(str, enum.Enum):
        RENDER = "render"

    with region.acquire(Job.RENDER, timeout=0) as lease:
        with pytest.raises(fencelock.Busy):
            other.acquire("render", timeout=0)
        region.commit(lease, Job.RENDER, b"x")
    assert other.read("render") == (b"x", lease.token)


def test_closed_is_named(region):
    assert fencelock.err_name(9) == "EBADF" and "closed" in fencelock.strerror(9)
    region.close()
    with pytest.raises(fencelock.Closed) as e:
        region.read("x")
    assert e.value.name == "EBADF" and str(e.value).startswith("EBADF: ")


def test_arguments_of_the_wrong_kind(region):
    with region.acquire("k", timeout=0) as lease:
        for call in (lambda: region.commit(None, "k/r", b"x"),
                     lambda: region.commit_u64(None, "k/r", 1),
                     lambda: region.commit_u64(lease, "k/r", True),
                     lambda: region.commit_token("k", True, "k/r", b"x")):
            with pytest.raises(TypeError):
                call()
        with pytest.raises(ValueError, match="3 us"):
            lease.keep_alive(lease=1e-6)
        import array
        region.commit(lease, "k/r", array.array("B", b"ab"))
        assert region.read("k/r")[0] == b"ab"


def test_a_library_that_is_not_libfencelock_is_an_import_error(tmp_path):
    import ctypes.util
    other_lib = ctypes.util.find_library("z") or "libc.so.6"
    env = dict(os.environ, FENCELOCK_LIB=other_lib,
               PYTHONPATH=os.path.dirname(os.path.dirname(fencelock.__file__)))
    p = subprocess.run([sys.executable, "-c", "import fencelock"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1
    assert "ImportError: fencelock:" in p.stderr and "is not libfencelock" in p.stderr


def test_close_ends_a_wait_made_by_an_on_lost_callback(daemon, other):
    """close() cancels the waits before it stops the keepalives (a stop waits for the
    running callback, which would wait for its acquire forever; second review)."""
    r = fencelock.open(daemon.region)
    held = other.acquire("held", lease=60)
    out, started = [], threading.Event()

    def on_lost(lease, error):
        started.set()
        try:
            r.acquire("held", lease=5, timeout=None)
            out.append("acquired")
        except fencelock.Closed:
            out.append("Closed")

    lease = r.acquire("lost", lease=0.3, timeout=0)
    lease.keep_alive(on_lost=on_lost)
    assert fencelock._native.lib.fl_release(r._h, lease._c) == 0  # its renewal fails
    assert started.wait(20)
    _wait_for_waiter(other, "held")
    r.close()  # returned: the callback's wait ended
    assert out == ["Closed"]
    held.release()


def test_close_from_a_signal_handler_while_a_keepalive_is_read(daemon):
    fired = []
    current = []
    old = signal.signal(signal.SIGUSR1, lambda s, f: (fired.append(1), current[0].close()))
    try:
        for rnd in range(50):
            r = fencelock.open(daemon.region)
            current[:] = [r]
            lease = r.acquire(f"k{rnd % 4}", lease=5, timeout=0)
            ka = lease.keep_alive()
            n = 0
            while not r.closed:
                ka.lost
                lease.deadline
                n += 1
                if n == 50:
                    os.kill(os.getpid(), signal.SIGUSR1)  # lands inside some read
            assert ka._k is None
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert len(fired) == 50


def test_close_in_a_fork_child_leaves_the_parents_calls_alone(daemon, other):
    """The child's copies of the parent's calls in flight and keepalives have no thread
    there: its close() only unmaps (second review: it waited for them forever)."""
    r = fencelock.open(daemon.region)
    held = other.acquire("held", lease=60)
    kept = r.acquire("kept", lease=0.3, timeout=0)
    ka = kept.keep_alive()
    t = threading.Thread(target=lambda: pytest.raises(fencelock.Closed, r.acquire, "held",
                                                      5, None))
    t.start()
    _wait_for_waiter(other, "held")
    pid = os.fork()
    if pid == 0:
        try:
            r.close()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert kept.check() and not ka.lost  # the parent's keepalive still renews
    time.sleep(0.4)  # past the 0.3 s lease: only the renewals keep it
    assert kept.check()
    r.close()
    t.join(20)
    held.release()


def test_signals_during_open_do_not_make_it_unregistered(daemon):
    """fl_open's registration retries a send or recv a signal interrupted (second review:
    1 open in 40 came back unregistered under a signal storm)."""
    stop = threading.Event()
    old = signal.signal(signal.SIGUSR1, lambda s, f: None)

    def kicker():
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.0002)

    t = threading.Thread(target=kicker, daemon=True)
    t.start()
    try:
        unregistered = 0
        for _ in range(300):
            with fencelock.open(daemon.region) as r:
                unregistered += not r.registered
    finally:
        stop.set()
        t.join(10)
        signal.signal(signal.SIGUSR1, old)
    assert unregistered == 0

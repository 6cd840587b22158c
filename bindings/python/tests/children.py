# SPDX-License-Identifier: MIT
"""Code run in child processes (multiprocessing, both start methods): importable by name."""
import threading

import fencelock


def seed_holder(region_path, conn):
    """Holder A of the seed scenario: acquire a short lease, report it, wait for "go"
    (the parent stops us in between, past the lease), then commit with the old token."""
    with fencelock.open(region_path) as r:
        lease = r.acquire("seed", lease=0.2, timeout=5)
        conn.send(("acquired", lease.token))
        assert conn.recv() == "go"
        try:
            r.commit(lease, "seed/value", b"written by A")
            conn.send(("committed", lease.token))
        except fencelock.StaleFence as e:
            conn.send(("stale", e.token, e.accepted, isinstance(e, fencelock.OwnershipLost)))
        try:
            lease.release()
            conn.send(("released",))
        except fencelock.OwnershipLost:
            conn.send(("release lost",))


def keepalive_holder(region_path, conn):
    """Keep a short lease alive; report when the keepalive says it is lost."""
    lost = threading.Event()
    seen = []

    def on_lost(lease, error):  # on the library's keepalive thread
        seen.append((lease.token, type(error).__name__, threading.current_thread().name))
        lost.set()

    with fencelock.open(region_path) as r:
        lease = r.acquire("kept", lease=0.15, timeout=5)
        k = lease.keep_alive(on_lost=on_lost)
        conn.send(("kept", lease.token))
        if not lost.wait(20):
            conn.send(("not lost",))
            return
        stop_error = None
        try:
            k.stop()
        except fencelock.OwnershipLost as e:
            stop_error = type(e).__name__
        conn.send(("lost", seen[0][0], seen[0][1], stop_error, k.lost, lease.check()))


def use_inherited(region, key, conn):
    """Given a Region the parent opened (fork start method): it must refuse, and a region
    opened here must work."""
    try:
        region.acquire(key, timeout=0)
        conn.send(("acquired with the parent's handle",))
        return
    except fencelock.ForkedHandle as e:
        msg = str(e)
    with fencelock.open(conn.recv()) as mine:
        with mine.acquire(key + "/child", timeout=5) as lease:
            mine.commit(lease, key + "/child", b"from the child")
            conn.send(("ok", msg, lease.token))


def open_own(region_path, key, conn):
    """spawn: open the region by path and work."""
    with fencelock.open(region_path) as r:
        with r.acquire(key, timeout=5) as lease:
            r.commit(lease, key, b"spawned")
            conn.send(("ok", lease.token, r.registered))

# SPDX-License-Identifier: MIT
"""The inspection API (Region.info/locks/records/clients) and the paths."""
import os

import fencelock


def test_info_locks_records_clients(daemon, region):
    with region.acquire("inspect/key", lease=30) as lease:
        region.commit(lease, "inspect/rec", b"12345")
        info = region.info()
        assert info.lock_capacity == 256 and info.record_capacity == 64
        assert info.ready == 1 and info.served == 1 and info.same_boot == 1
        assert info.epoch == fencelock.token_epoch(lease.token)
        assert len(info.boot_id) == 36
        locks = {l.key: l for l in region.locks()}
        li = locks["inspect/key"]
        assert li.state == 1 and li.token == lease.token and li.holder_pid == os.getpid()
        assert 0 < li.lease_left_ns <= 30e9
        rec = {r.name: r for r in region.records()}["inspect/rec"]
        assert rec.bound_key == "inspect/key" and rec.accepted_token == lease.token
        assert rec.size == 5 and rec.version == 1
        mine = [c for c in region.clients() if c.pid == os.getpid()]
        assert mine and all(c.attached == 1 for c in mine)
        assert info.supervisor_pid == daemon.proc.pid


def test_readonly_handle_reads_and_inspects(daemon, region):
    with region.acquire("k") as lease:
        region.commit(lease, "k", b"v")
    with fencelock.open(daemon.region, readonly=True) as ro:
        assert ro.read("k")[0] == b"v"
        assert [l.key for l in ro.locks()] == ["k"]
        try:
            ro.acquire("k")
            raise AssertionError("a read-only handle acquired")
        except fencelock.Error as e:
            assert e.errno == 22


def test_paths(daemon, region, monkeypatch):
    assert region.path == daemon.region
    monkeypatch.setenv("FENCELOCK_REGION", daemon.region)
    assert fencelock.default_region_path() == daemon.region
    with fencelock.open() as r:
        assert r.path == daemon.region and r.registered
    monkeypatch.delenv("FENCELOCK_REGION")
    # The documented defaults: root's system-wide region, a user's runtime
    # directory, else the /dev/shm fallback.
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.getuid() == 0 and os.path.isdir("/run"):
        want = "/run/fencelock/region"
    elif os.getuid() != 0 and xdg.startswith("/") and os.path.isdir(xdg):
        want = f"{xdg}/fencelock/region"
    else:
        want = f"/dev/shm/fencelock-{os.getuid()}/region"
    assert fencelock.default_region_path() == want


def test_unregistered_without_a_supervisor(daemon):  # I10
    daemon.stop()
    with fencelock.open(daemon.region) as r:
        assert not r.registered
        with r.acquire("k", timeout=0) as lease:
            assert r.commit(lease, "k", b"still fenced") == lease.token


def test_unregistered_clients_are_listed(daemon, region):  # I10, I12
    assert region.unregistered() == []
    daemon.stop()
    with fencelock.open(daemon.region) as r:
        assert not r.registered
        mine = [u for u in r.unregistered() if u.pid == os.getpid()]
        assert len(mine) == 1
        u = mine[0]
        assert u.uid == os.getuid() and u.reason < 0 and u.start_time > 0
        assert fencelock.err_name(u.reason) in ("ECONNREFUSED", "ENOENT")
        assert u.opened_unix_ns > 0
        assert not hasattr(u, "reserved0") and not hasattr(u, "reserved")
    assert [u for u in region.unregistered() if u.pid == os.getpid()] == []

# SPDX-License-Identifier: MIT
"""Key handles: Region.resolve() and acquire() of a Key (fl_key_resolve, fl_acquire_key,
fl_acquire_key_cancelable)."""
import errno

import pytest

import fencelock


def test_resolve_then_acquire_by_key_handle(region, other):
    k = region.resolve("jobs/1")
    assert isinstance(k, fencelock.Key) and k.name == "jobs/1"
    assert "jobs/1" in repr(k)
    assert region.locks()[0].key == "jobs/1" and region.locks()[0].token == 0  # made, not taken
    tokens = []
    for i in range(6):  # by handle and by name, interleaved: one token sequence
        with region.acquire(k if i % 2 else "jobs/1", timeout=0) as lease:
            assert lease.key == "jobs/1" and lease.check()
            region.commit(lease, "jobs/1/out", b"x")
            tokens.append(lease.token)
    assert tokens == sorted(tokens) and len(set(tokens)) == 6
    assert tokens[-1] == tokens[0] + 5
    assert region.resolve(b"jobs/1").slot == k.slot


def test_key_handle_waits_and_cancels(region, other):
    k = region.resolve("w")
    with other.acquire("w", lease=30):
        with pytest.raises(fencelock.Busy):
            region.acquire(k, timeout=0)
        with pytest.raises(fencelock.Busy):
            region.acquire(k, timeout=0.02)
        with fencelock.Cancel() as c:
            c.cancel()
            with pytest.raises(fencelock.Cancelled):
                region.acquire(k, timeout=None, cancel=c)
    with region.acquire(k, timeout=5) as lease:
        with pytest.raises(fencelock.Deadlock):
            region.acquire(k, timeout=1)


def test_key_handle_of_another_region_is_refused(daemon, region, other):
    k = region.resolve("k")
    with pytest.raises(ValueError):
        other.acquire(k)
    with pytest.raises(TypeError):
        region.acquire(object())
    with pytest.raises(fencelock.Error) as e:
        region.resolve("")
    assert e.value.errno == errno.EINVAL
    with fencelock.open(daemon.region, readonly=True) as ro:
        with pytest.raises(fencelock.Error) as e:
            ro.resolve("k")
        assert e.value.errno == errno.EINVAL
    import pickle
    with pytest.raises(TypeError):
        pickle.dumps(k)

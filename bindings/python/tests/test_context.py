# SPDX-License-Identifier: MIT
"""Context managers: a Lease releases on exit, also on an exception, and a release that
finds the lease lost never masks the exception that ended the block."""
import pytest

import fencelock


class Boom(Exception):
    pass


def test_lease_released_on_normal_exit(region, other):
    with region.acquire("k") as lease:
        assert lease.check()
    assert not lease.check()
    with other.acquire("k", timeout=0) as again:
        assert again.token > lease.token and not again.expired_previous


def test_lease_released_when_the_block_raises(region, other):
    with pytest.raises(Boom):
        with region.acquire("k"):
            raise Boom()
    other.acquire("k", timeout=0).release()  # free: not Busy


def test_lost_lease_does_not_mask_the_exception(region, other):
    with pytest.raises(Boom) as e:
        with region.acquire("k", lease=0.05) as lease:
            taker = other.acquire("k", lease=10, timeout=5)
            raise Boom()
    notes = getattr(e.value, "__notes__", [])
    assert len(notes) == 1 and "ESTALE" in notes[0] and str(lease.token) in notes[0]
    assert taker.check()
    taker.release()


def test_lost_lease_raises_on_normal_exit(region, other):
    with pytest.raises(fencelock.OwnershipLost):
        with region.acquire("k", lease=0.05):
            other.acquire("k", lease=10, timeout=5)


def test_explicit_release_then_exit(region):
    with region.acquire("k") as lease:
        lease.release()
    with pytest.raises(fencelock.OwnershipLost):
        lease.release()  # the C library refuses a second release


def test_renew_moves_the_deadline(region):
    import time
    with region.acquire("k", lease=1.0) as lease:
        first = lease.deadline
        assert time.monotonic() < first <= time.monotonic() + 1.0
        lease.renew(5.0)
        assert lease.deadline > first + 3
        lease.renew()  # the new default: 5.0
        assert lease.remaining() > 4


def test_region_context_closes(daemon):
    with fencelock.open(daemon.region) as r:
        assert r.registered and r.path == daemon.region and r.backend == "shm"
    assert r.closed
    r.close()  # again: nothing
    with pytest.raises(ValueError):
        r.path

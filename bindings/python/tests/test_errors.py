# SPDX-License-Identifier: MIT
"""Every exception class, and Error's errno, name and detail (fl_last_error())."""
import errno
import threading

import pytest

import fencelock


def test_busy_for_a_try_and_for_a_timed_wait(region, other):
    with region.acquire("k", lease=10):
        with pytest.raises(fencelock.Busy) as e:
            other.acquire("k", timeout=0)
        assert e.value.errno == errno.EBUSY and e.value.name == "EBUSY"
        with pytest.raises(fencelock.Busy) as e:
            other.acquire("k", timeout=0.02)
        assert e.value.errno == errno.ETIMEDOUT
        assert isinstance(e.value, fencelock.Error) and isinstance(e.value, OSError)


def test_ownership_lost_after_takeover(region, other):  # I4
    old = region.acquire("k", lease=0.05)
    new = other.acquire("k", lease=10, timeout=5)  # waits for old's deadline
    assert new.token > old.token and new.expired_previous
    assert not old.check() and new.check()
    with pytest.raises(fencelock.OwnershipLost) as e:
        old.renew()
    assert e.value.errno == errno.ESTALE and not isinstance(e.value, fencelock.StaleFence)
    with pytest.raises(fencelock.OwnershipLost):
        old.release()
    new.release()


def test_stale_fence_carries_both_tokens(region, other):  # I2
    old = region.acquire("k", lease=0.05)
    new = other.acquire("k", lease=10, timeout=5)
    assert other.commit(new, "r", b"new") == new.token
    with pytest.raises(fencelock.StaleFence) as e:
        region.commit(old, "r", b"old")
    assert (e.value.token, e.value.accepted) == (old.token, new.token)
    assert isinstance(e.value, fencelock.OwnershipLost) and e.value.errno == errno.ESTALE
    assert region.read("r") == (b"new", new.token)
    # strict: an equal token is refused too; not strict: accepted again
    assert other.commit(new, "r", b"again") == new.token
    with pytest.raises(fencelock.StaleFence) as e:
        other.commit(new, "r", b"strict", strict=True)
    assert e.value.accepted == new.token
    assert other.commit_u64(new, "r64", 52) == new.token
    with pytest.raises(fencelock.StaleFence):
        region.commit_u64(old, "r64", 51)
    assert region.read_u64("r64") == (52, new.token)
    new.release()


def test_scope_mismatch(region):  # I8
    with region.acquire("a") as a, region.acquire("b") as b:
        region.commit(a, "bound-to-a", b"x")
        with pytest.raises(fencelock.ScopeMismatch) as e:
            region.commit(b, "bound-to-a", b"y")
        assert e.value.errno == errno.EXDEV
        assert region.read("bound-to-a") == (b"x", a.token)


def test_not_found_is_a_key_error(region):
    with pytest.raises(KeyError):
        region.read("never")
    with pytest.raises(fencelock.NotFound) as e:
        region.read_u64("never")
    assert e.value.errno == errno.ENOENT and "never" in str(e.value)


def test_other_errors_carry_the_library_detail(region, tmp_path):  # I9
    size = region.info().record_size
    with region.acquire("k") as lease:
        with pytest.raises(fencelock.Error) as e:
            region.commit(lease, "big", b"x" * (size + 1))
        assert type(e.value) is fencelock.Error and e.value.errno == errno.EMSGSIZE
        assert e.value.detail and e.value.name == "EMSGSIZE"
    with pytest.raises(fencelock.Error) as e:
        region.acquire("k" * (fencelock.KEY_MAX + 1))
    assert e.value.errno == errno.EINVAL
    missing = tmp_path / "no-such-region"
    with pytest.raises(fencelock.Error) as e:
        fencelock.open(missing)
    assert e.value.errno == errno.ENOENT and str(missing) in e.value.detail
    junk = tmp_path / "junk"
    junk.write_bytes(b"not a region" * 1000)
    with pytest.raises(fencelock.Error) as e:
        fencelock.open(junk)
    assert e.value.errno == errno.EPROTO and str(junk) in str(e.value)
    assert fencelock.strerror(errno.ESTALE) == fencelock.strerror(-errno.ESTALE)
    assert "ownership" in fencelock.strerror(errno.ESTALE)
    assert fencelock.err_name(errno.EXDEV) == "EXDEV"


def test_bad_arguments_are_python_errors(region):
    with pytest.raises(ValueError):
        region.acquire("k", lease=0)
    with pytest.raises(ValueError):
        region.acquire("k", timeout=-1)
    with pytest.raises(TypeError):
        region.acquire(42)
    region.close()
    with pytest.raises(ValueError):
        region.acquire("k")


def test_the_detail_is_this_threads_own(daemon, tmp_path):
    """fl_last_error() is thread-local: each thread's exception names its own failure even
    while another thread fails differently at the same time."""
    errors = []

    def fail_open(n):
        for i in range(300):
            p = tmp_path / f"missing-{n}-{i}"
            try:
                fencelock.open(p)
            except fencelock.Error as e:
                if str(p) not in e.detail:
                    errors.append(e.detail)

    def fail_commit(r):
        with r.acquire("t") as lease:
            for _ in range(300):
                try:
                    r.commit(lease, "t", b"x" * 100000)
                except fencelock.Error as e:
                    if e.errno != errno.EMSGSIZE or "missing" in e.detail:
                        errors.append(e.detail)

    with fencelock.open(daemon.region) as r:
        ts = [threading.Thread(target=fail_open, args=(n,)) for n in range(2)]
        ts.append(threading.Thread(target=fail_commit, args=(r,)))
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert errors == []

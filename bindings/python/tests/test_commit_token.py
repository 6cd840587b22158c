# SPDX-License-Identifier: MIT
"""Region.commit_token: the fenced commit for a holder with the key and the token but not
the Lease (fl_commit_token)."""
import errno

import pytest

import fencelock


def test_commit_token_is_fenced_like_commit(region, other):  # I2
    old = region.acquire("k", lease=0.05)
    token = old.token
    assert other.commit_token("k", token, "r", b"by token") == token
    assert region.read("r") == (b"by token", token)
    new = other.acquire("k", lease=10, timeout=5)  # takes old's lease over
    assert other.commit_token("k", new.token, "r", memoryview(b"newer")) == new.token
    with pytest.raises(fencelock.StaleFence) as e:
        region.commit_token("k", token, "r", b"stale")
    assert (e.value.token, e.value.accepted) == (token, new.token)
    assert region.commit_token(b"k", new.token, "r", b"again") == new.token
    with pytest.raises(fencelock.StaleFence):
        region.commit_token("k", new.token, "r", b"strict", strict=True)
    assert region.read("r") == (b"again", new.token)
    new.release()


def test_commit_token_errors(region):  # I8
    with region.acquire("a") as a, region.acquire("b") as b:
        region.commit(a, "of-a", b"x")
        with pytest.raises(fencelock.ScopeMismatch):
            region.commit_token("b", b.token, "of-a", b"y")
        with pytest.raises(fencelock.NotFound) as e:  # a KeyError too
            region.commit_token("never-acquired", a.token, "r", b"z")
        assert e.value.errno == errno.ENOENT and "never-acquired" in str(e.value)
        assert isinstance(e.value, KeyError)
        with pytest.raises(fencelock.Error) as e:  # a token the key never issued
            region.commit_token("a", b.token + 1000, "of-a", b"z")
        assert e.value.errno == errno.EINVAL
        with pytest.raises(ValueError):
            region.commit_token("a", 0, "of-a", b"z")
        with pytest.raises(TypeError):
            region.commit_token("a", str(a.token), "of-a", b"z")
        assert region.read("of-a") == (b"x", a.token)

# SPDX-License-Identifier: MIT
"""I1 I2 I4: the seed scenario through the binding.  Holder A is stopped (SIGSTOP)
past its short lease; B takes the key over with a greater token and commits; A
resumes and its commit raises StaleFence naming B's token; the record keeps B's data."""
import multiprocessing
import os
import signal

import pytest

import fencelock
from children import seed_holder
from conftest import wait_stopped


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_seed_scenario_stale_holder_is_fenced(daemon, method):
    ctx = multiprocessing.get_context(method)
    parent_end, child_end = ctx.Pipe()
    a = ctx.Process(target=seed_holder, args=(daemon.region, child_end))
    a.start()
    try:
        with fencelock.open(daemon.region) as r:
            assert parent_end.poll(30), "holder A did not acquire"
            what, token_a = parent_end.recv()
            assert what == "acquired"
            os.kill(a.pid, signal.SIGSTOP)
            wait_stopped(a.pid)
            # B waits on the futex until A's deadline passes, then takes over.
            with r.acquire("seed", lease=5.0, timeout=10) as b:
                assert b.token > token_a
                assert b.expired_previous and not b.owner_died_previous
                assert r.commit(b, "seed/value", b"written by B") == b.token
                os.kill(a.pid, signal.SIGCONT)
                parent_end.send("go")
                assert parent_end.poll(30)
                assert parent_end.recv() == ("stale", token_a, b.token, True)
                assert parent_end.recv() == ("release lost",)
                assert r.read("seed/value") == (b"written by B", b.token)
    finally:
        os.kill(a.pid, signal.SIGCONT)
        a.join(30)
    assert a.exitcode == 0

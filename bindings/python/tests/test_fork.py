# SPDX-License-Identifier: MIT
"""I12: a Region used in a fork() child raises ForkedHandle with a clear message; the
child opens its own.  Both multiprocessing start methods, and a bare os.fork()."""
import multiprocessing
import os
import pickle

import pytest

import fencelock
from children import open_own, use_inherited


def test_bare_fork_child_gets_forked_handle(region):
    with region.acquire("parent's", lease=30) as held:
        pid = os.fork()
        if pid == 0:  # the child: report through the exit status only
            code = 0
            try:
                region.acquire("k", timeout=0)
                code = 1
            except fencelock.ForkedHandle as e:
                if "open the region again" not in str(e) or e.errno != 10:
                    code = 2
            except BaseException:
                code = 3
            try:
                held.release()
                code = code or 4
            except fencelock.ForkedHandle:
                pass
            region.close()  # unmaps the child's copy only
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert held.check()  # the child's close left the parent's lock alone


def test_multiprocessing_fork_child_refuses_the_parents_region(daemon, region):
    ctx = multiprocessing.get_context("fork")
    parent_end, child_end = ctx.Pipe()
    p = ctx.Process(target=use_inherited, args=(region, "mp", child_end))
    p.start()
    parent_end.send(daemon.region)
    assert parent_end.poll(30)
    what, msg, token = parent_end.recv()
    p.join(30)
    assert p.exitcode == 0 and what == "ok"
    assert "ECHILD" in msg and "open the region again" in msg
    assert region.read("mp/child") == (b"from the child", token)


def test_spawn_cannot_take_a_region_and_opens_its_own(daemon, region):
    ctx = multiprocessing.get_context("spawn")
    with pytest.raises(TypeError, match="fencelock.open"):
        pickle.dumps(region)
    parent_end, child_end = ctx.Pipe()
    p = ctx.Process(target=open_own, args=(daemon.region, "spawned", child_end))
    p.start()
    assert parent_end.poll(60)
    what, token, registered = parent_end.recv()
    p.join(30)
    assert p.exitcode == 0 and registered
    assert region.read("spawned") == (b"spawned", token)


def test_exceptions_cross_processes(region):
    e = fencelock.StaleFence(116, None, "detail", token=5, accepted=7)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is fencelock.StaleFence
    assert (back.errno, back.token, back.accepted, back.detail) == (116, 5, 7, "detail")

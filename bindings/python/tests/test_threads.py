# SPDX-License-Identifier: MIT
"""Threads sharing one Region: different keys at once, and a thread waiting in acquire
while others run (ctypes drops the GIL for the call)."""
import threading



def test_threads_acquire_different_keys_through_one_region(region):  # I1
    n_threads, rounds = 6, 200
    tokens = {i: [] for i in range(n_threads)}
    failures = []

    def work(i):
        try:
            for j in range(rounds):
                with region.acquire(f"thread/{i}", lease=5, timeout=5) as lease:
                    region.commit(lease, f"thread/{i}", j.to_bytes(8, "little"))
                    tokens[i].append(lease.token)
        except Exception as e:  # reported below
            failures.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert failures == []
    for i in range(n_threads):
        assert tokens[i] == sorted(set(tokens[i])) and len(tokens[i]) == rounds
        data, fence = region.read(f"thread/{i}")
        assert data == (rounds - 1).to_bytes(8, "little") and fence == tokens[i][-1]


def test_a_waiting_thread_does_not_block_the_others(region, other):  # I6
    held = region.acquire("handoff", lease=30)
    got = []
    # timeout=None: wait without limit (a try would fail here: the key is held)
    waiter = threading.Thread(target=lambda: got.append(other.acquire("handoff", timeout=None)),
                              daemon=True)
    waiter.start()
    # The waiter sleeps inside fl_acquire; this thread still runs and releases.
    while not any(i.key == "handoff" and i.waiters for i in region.locks()):
        assert waiter.is_alive()
    held.release()
    waiter.join(20)
    assert got and got[0].token > held.token
    got[0].release()

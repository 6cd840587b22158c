# SPDX-License-Identifier: MIT
"""A typical user program, type-checked by test_types.py with mypy --strict (never run)."""
import threading
from typing import List, Optional, Tuple

import fencelock


def work(region_path: str) -> Tuple[int, bytes]:
    stop = threading.Event()

    def lost(lease: fencelock.Lease, error: fencelock.Error) -> None:
        stop.set()

    with fencelock.open(region_path) as region:
        key: fencelock.Key = region.resolve("jobs/42")
        with region.acquire(key, lease=5.0, timeout=1) as lease:
            token: int = lease.token
            left: float = lease.remaining()
            with lease.keep_alive(on_lost=lost) as k:
                fd: int = k.fileno()
                accepted: int = region.commit(lease, "jobs/42/state", b"done", strict=True)
                region.commit_u64(lease, "jobs/42/n", 7)
            lease.renew(10)
            assert accepted == token and fd >= 0 and left > 0
        data, fence = region.read("jobs/42/state")
        locks: List[fencelock.LockInfo] = region.locks()
        states = [lk.state for lk in locks if lk.state is fencelock.LockState.HELD]
        cancel: Optional[fencelock.Cancel] = fencelock.Cancel()
        try:
            region.acquire("other", timeout=None, cancel=cancel).release()
        except fencelock.Busy as e:
            print(e.errno, e.detail)
        except fencelock.StaleFence as e:
            print(e.token, e.accepted)
        print(states, region.info().run_state.name)
        return fence, data


async def work_async(region_path: str) -> int:
    import asyncio

    import fencelock.aio

    async with fencelock.aio.open(region_path) as r:
        async with await r.acquire("jobs/43", lease=5.0, timeout=1.0) as lease:
            await lease.renew()
            accepted: int = await r.commit(lease, "jobs/43/state", b"done")
        data, fence = await r.read("jobs/43/state")
        try:
            await asyncio.wait_for(r.acquire("busy"), timeout=0.5)
        except TimeoutError:
            pass
        return accepted + fence + len(data)

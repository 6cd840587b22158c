# SPDX-License-Identifier: MIT
"""Mistakes mypy must report (test_types.py counts them; never run)."""
import fencelock

with fencelock.open() as region:
    lease = region.acquire(42)  # a key is str or bytes
    region.commit(lease, "rec", "text")  # data is bytes-like, not str
    token: str = lease.token  # an int

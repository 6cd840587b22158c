# SPDX-License-Identifier: MIT
"""The package's inline annotations: mypy --strict is clean for the package and for a
typical user program, reports a user's type mistakes, and the wheel ships py.typed
(test_wheel.py).  Debian: python3-mypy."""
import dataclasses
import os
import subprocess
import sys

import pytest

import fencelock
from fencelock import _native

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(os.path.dirname(HERE), "fencelock")


def _mypy(*paths):
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.fail("mypy is not installed for this Python (Debian: apt-get install python3-mypy)")
    env = dict(os.environ, MYPYPATH=os.path.dirname(HERE))
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--cache-dir", os.devnull, *paths], env=env, capture_output=True,
                          text=True, timeout=600)


def test_the_package_is_mypy_strict_clean():
    r = _mypy(PACKAGE)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_user_program_is_mypy_strict_clean():
    r = _mypy(os.path.join(HERE, "typed", "user_program.py"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_users_type_mistakes_are_reported():
    r = _mypy(os.path.join(HERE, "typed", "user_mistakes.py"))
    assert r.returncode == 1
    errors = [line for line in r.stdout.splitlines() if ": error:" in line]
    assert [int(e.split(":")[1]) for e in errors] == [6, 7, 8], r.stdout


def test_info_dataclasses_have_every_field_of_their_struct():
    pairs = [(fencelock.RegionInfo, _native.FlRegionInfo), (fencelock.LockInfo, _native.FlLockInfo),
             (fencelock.RecordInfo, _native.FlRecordInfo),
             (fencelock.ClientInfo, _native.FlClientInfo),
             (fencelock.UnregisteredInfo, _native.FlUnregisteredInfo)]
    for cls, struct in pairs:
        want = [n for n, _ in struct._fields_ if not n.startswith("reserved")]
        assert [f.name for f in dataclasses.fields(cls)] == want, cls.__name__

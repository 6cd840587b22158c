# SPDX-License-Identifier: MIT
"""Fixtures: a private fencelockd per test, started and awaited through the
systemd notify protocol (READY=1), never through sleeps.

Environment (set by ctest; for a manual run the defaults are the source
tree's build/ directory):
  FENCELOCKD      the supervisor binary
  FENCELOCK_LIB   the library the binding loads
"""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
os.environ.setdefault("FENCELOCK_LIB", os.path.join(TOP, "build", "libfencelock.so"))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import fencelock  # noqa: E402  (after FENCELOCK_LIB is set)


def fencelockd_path():
    path = os.environ.get("FENCELOCKD", os.path.join(TOP, "build", "fencelockd"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"fencelockd not found at {path}: build it, or set FENCELOCKD")
    return path


class Daemon:
    """One fencelockd serving dir/region, its state file beside it."""

    def __init__(self, directory, extra=()):
        self.dir = str(directory)
        self.region = os.path.join(self.dir, "region")
        self.log = self.region + ".log"
        self.proc = None
        self.start(extra)

    def start(self, extra=()):
        sock_path = os.path.join(self.dir, "notify")
        if os.path.exists(sock_path):
            os.unlink(sock_path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(sock_path)
        env = dict(os.environ, NOTIFY_SOCKET=sock_path)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [fencelockd_path(), "--region", self.region, "--state", self.region + ".state",
                 "--locks", "256", "--records", "64", *extra],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise RuntimeError(f"fencelockd did not get ready; its log:\n{self.logtext()}")
                sock.settimeout(min(left, 0.2))
                try:
                    if b"READY=1" in sock.recv(4096):
                        return
                except socket.timeout:
                    pass
        finally:
            sock.close()

    def logtext(self):
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(20)


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path)
    yield d
    d.stop()


@pytest.fixture
def region(daemon):
    with fencelock.open(daemon.region) as r:
        yield r


def proc_state(pid):
    """The state letter of /proc/PID/stat ('S', 'T', ...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def wait_stopped(pid, timeout=10.0):
    """Wait until pid is stopped by a signal (polls /proc)."""
    deadline = time.monotonic() + timeout
    while proc_state(pid) not in ("T", "t"):
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} did not stop")
        time.sleep(0.001)


@pytest.fixture
def other(daemon):
    """A second handle on the same region: the "other process" of a takeover, so no handle
    ever waits for a key it holds itself."""
    with fencelock.open(daemon.region) as r:
        yield r

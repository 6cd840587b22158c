#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench.py - what the Python binding costs over the C calls it wraps (issue 16).

Times, through the binding, the two operations bench/ measures in C:
uncontended acquire+release by key (try once, as fb_uncontended does) and an
8-byte fenced commit by the holder (as fb_commit does), plus the same
acquire+release through bare ctypes calls (the floor any ctypes binding
pays).  The C figures come from the same run: either from a bench/run CSV
(--c-csv, how bench/run calls this) or by running fb_uncontended and fb_commit
now.  Prints a table; --csv appends rows in bench/run's format (question 8).

    FENCELOCK_LIB=build/libfencelock.so python3 bindings/python/bench.py --build build

Options:
  --build DIR        build directory (fencelockd, bench/fb_*; default $FL_BENCH_BUILD,
                     else build-bench, else build)
  --c-csv FILE       take the C medians from this bench/run CSV instead of running C
  --csv FILE         append result rows (kind,question,case,metric,value,unit,...)
  --seconds S        measuring time for the Python side [3]
"""
import argparse
import ctypes
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
QUESTION = 8
C_ACQREL = "fencelock acquire+release by key"
C_COMMIT8 = "fencelock commit 8 B; uncontended"


def build_dir(arg):
    for d in (arg, os.environ.get("FL_BENCH_BUILD"), os.path.join(TOP, "build-bench"),
              os.path.join(TOP, "build")):
        if d and os.path.exists(os.path.join(d, "fencelockd")):
            return d
    sys.exit("bench.py: no build directory with fencelockd (give --build)")


def start_daemon(build, work):
    region = os.path.join(work, "region")
    sock_path = os.path.join(work, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(20)
    proc = subprocess.Popen([os.path.join(build, "fencelockd"), "--region", region, "--state",
                             region + ".state"], env=dict(os.environ, NOTIFY_SOCKET=sock_path),
                            stdout=subprocess.DEVNULL, stderr=open(region + ".log", "wb"))
    while b"READY=1" not in sock.recv(4096):
        pass
    sock.close()
    return proc, region


def measure(ops, seconds, rounds=5):
    """Interleaved rounds of batches, as bench/timing.c does: per-op median and p99 (ns)."""
    samples = {name: [] for name in ops}
    batch = {}
    for name, fn in ops.items():  # a batch takes about 20 us... 50 us
        n = 1
        while True:
            t = time.perf_counter_ns()
            fn(n)
            if time.perf_counter_ns() - t > 50_000:
                break
            n *= 2
        batch[name] = n
    end = time.monotonic() + seconds
    per_round = seconds / rounds / len(ops)
    while time.monotonic() < end:
        for name, fn in ops.items():
            stop = time.monotonic() + per_round
            n = batch[name]
            while time.monotonic() < stop:
                t = time.perf_counter_ns()
                fn(n)
                samples[name].append((time.perf_counter_ns() - t) / n)
    out = {}
    for name, s in samples.items():
        s.sort()
        out[name] = (statistics.median(s), s[min(len(s) - 1, int(len(s) * 0.99))], batch[name])
    return out


def c_medians(build, c_csv, work):
    """C medians (ns) of acquire+release and 8-byte commit: from a CSV, or run them now."""
    files = [c_csv] if c_csv else []
    if not c_csv:
        for prog in ("fb_uncontended", "fb_commit"):
            path = os.path.join(build, "bench", prog)
            if not os.access(path, os.X_OK):
                sys.exit(f"bench.py: {path} missing (cmake --build {build} --target "
                         "bench_programs), or give --c-csv")
            out = os.path.join(work, prog + ".csv")
            d = os.path.join(work, prog)
            os.mkdir(d)
            subprocess.run([path, "--quick", "--budget", "3", "--dir", d, "--csv", out],
                           check=True, stderr=subprocess.DEVNULL)
            files.append(out)
    found = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                p = line.rstrip("\n").split(",")
                if len(p) >= 6 and p[0] == "result" and p[3] == "median" and \
                        p[2] in (C_ACQREL, C_COMMIT8):
                    found[p[2]] = float(p[4])
    return found.get(C_ACQREL), found.get(C_COMMIT8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build")
    ap.add_argument("--c-csv")
    ap.add_argument("--csv")
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    build = build_dir(a.build)
    os.environ.setdefault("FENCELOCK_LIB", os.path.join(build, "libfencelock.so"))
    sys.path.insert(0, HERE)
    import fencelock
    from fencelock import _native

    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    work = tempfile.mkdtemp(prefix="flpybench.", dir=shm)
    proc = None
    try:
        c_acq, c_commit = c_medians(build, a.c_csv, work)
        proc, path = start_daemon(build, work)
        try:  # one CPU, as the C benchmarks pin themselves
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
        except OSError:
            pass
        with fencelock.open(path) as r:
            key, rec, data = "bench/py", "bench/py/rec", b"8 bytes!"
            lib, h = _native.lib, r._h
            bkey, c = key.encode(), _native.FlLease()
            ref = ctypes.byref(c)

            def acqrel(n):
                for _ in range(n):
                    r.acquire(key, 60.0, 0).release()

            def raw_acqrel(n):
                for _ in range(n):
                    lib.fl_acquire(h, bkey, 60_000_000_000, 0, ref)
                    lib.fl_release(h, ref)

            held = r.acquire("bench/py/held", 600.0, 0)

            def commit8(n):
                for _ in range(n):
                    r.commit(held, rec, data)

            res = measure({"acqrel": acqrel, "raw": raw_acqrel, "commit": commit8}, a.seconds)
            held.release()
    finally:
        if proc:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)

    def ratio(py, cval):
        return py / cval if cval else float("nan")

    rows = [("python: acquire+release by key", res["acqrel"], c_acq),
            ("python: 8-byte commit", res["commit"], c_commit),
            ("python bare ctypes calls: acquire+release", res["raw"], c_acq)]
    print("| binding operation | median | p99 | C median (same run) | binding / C |")
    print("|---|---:|---:|---:|---:|")
    for name, (med, p99, _), cval in rows:
        print(f"| {name} | {med:.0f} ns | {p99:.0f} ns | "
              f"{cval if cval is None else f'{cval:.1f} ns'} | {ratio(med, cval):.1f}x |")
    bare = res["raw"][0]
    print(f"\nacquire+release: binding / bare ctypes calls = {res['acqrel'][0] / bare:.2f}x "
          "(issue 26's target: <= 2x)")
    if a.csv:
        with open(a.csv, "a", encoding="utf-8") as f:
            f.write(f"result,{QUESTION},python: acquire+release by key,binding / bare ctypes,"
                    f"{res['acqrel'][0] / bare:.2f},x,,\n")
            for name, (med, p99, n), cval in rows:
                f.write(f"result,{QUESTION},{name},median,{med:.1f},ns,,\n")
                f.write(f"result,{QUESTION},{name},p99,{p99:.1f},ns,,\n")
                f.write(f"result,{QUESTION},{name},C median,{cval or 'nan'},ns,,\n")
                f.write(f"result,{QUESTION},{name},binding / C,{ratio(med, cval):.2f},x,,\n")


if __name__ == "__main__":
    main()

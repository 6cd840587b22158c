#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""etcd_shapes.py - where the time of fencelock's acquire and release Txns
goes inside etcd (question 9, issue 28's lock-service target).

fb_etcd shows fencelock's calls within 1.1x of raw Txns of their own shapes
and the pair about 1.4x etcd's lock service (lock + unlock).  This script
takes the acquire Txn of a waiting acquisition (src/etcd/lock.c, ACQUIRE)
apart, one piece at a time, and times each variant against a Txn of one put
and the lock service, interleaved in random order, on one kept-alive
connection to a three-member loopback cluster it starts (private ports and
data directory, stopped at the end).  The queue is kept as the library
keeps it (each release rewrites its entry "R E T" and deletes the one
before), so every variant sees one released entry.  The client is Python:
its own cost is the same for every variant, so compare the differences.

  bench/etcd_shapes.py [ROUNDS]      (default 200; needs etcd on PATH)
"""
import base64
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def b(x):
    return base64.b64encode(x if isinstance(x, bytes) else x.encode()).decode()


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def start_cluster(tmp):
    ports = free_ports(6)
    client, peer = ports[:3], ports[3:]
    init = ",".join(f"m{i}=http://127.0.0.1:{peer[i]}" for i in range(3))
    procs = []
    for i in range(3):
        log = open(os.path.join(tmp, f"m{i}.log"), "w")
        procs.append(subprocess.Popen(
            ["etcd", "--name", f"m{i}", "--data-dir", os.path.join(tmp, f"m{i}"),
             "--listen-client-urls", f"http://127.0.0.1:{client[i]}",
             "--advertise-client-urls", f"http://127.0.0.1:{client[i]}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer[i]}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer[i]}",
             "--initial-cluster", init, "--initial-cluster-token", f"shapes-{os.getpid()}",
             "--initial-cluster-state", "new"], stdout=log, stderr=log))
    return procs, client[0]


class Conn:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def post(self, path, body):
        self.c.request("POST", path, json.dumps(body, separators=(",", ":")),
                       {"Content-Type": "application/json"})
        r = self.c.getresponse()
        d = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status}: {d[:200]!r}")
        return json.loads(d)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    tmp = tempfile.mkdtemp(prefix="flshapes.")
    procs, port = start_cluster(tmp)
    try:
        run(rounds, port)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def run(rounds, port):
    conn = None
    for _ in range(100):  # until a leader answers
        try:
            conn = Conn(port)
            conn.post("/v3/kv/put", {"key": b("s/epoch"), "value": b("1")})
            break
        except (OSError, RuntimeError, http.client.HTTPException):
            conn = None
            time.sleep(0.1)
    if conn is None:
        sys.exit("etcd_shapes: the cluster did not answer")
    post = conn.post
    ep, last = b("s/epoch"), b("s/last/k")
    q0, q1 = b(b"s/lock/k\0"), b(b"s/lock/k\1")
    lease = int(post("/v3/lease/grant", {"TTL": "600"})["ID"])
    lock_lease = int(post("/v3/lease/grant", {"TTL": "600"})["ID"])

    def entry(i):
        return b(b"s/lock/k\0" + b"%032x" % i)

    def cmpv(k, res, v):
        return {"key": k, "target": "VALUE", "result": res, "value": v}

    def cmpc(k, rev):
        return {"key": k, "target": "CREATE", "result": "EQUAL", "create_revision": str(rev)}

    def rng(desc, lim):
        return {"request_range": {"key": q0, "range_end": q1,
                                  "sort_order": "DESCEND" if desc else "ASCEND",
                                  "sort_target": "CREATE", "limit": str(lim)}}

    def ops(m, ranges=True, mark=True):
        o = [rng(True, 1), rng(False, 2)] if ranges else []
        o.append({"request_put": {"key": m, "value": b("W 0000001 12345 benchhost"),
                                  "lease": str(lease)}})
        if mark:
            o.append({"request_put": {"key": last, "value": b("q0000001"), "prev_kv": True}})
        return o

    def diag(m):
        return [{"request_range": {"key": ep}}, {"request_range": {"key": last}},
                {"request_range": {"key": m}}, rng(True, 1), rng(False, 2)]

    def base(m):
        return [cmpv(ep, "EQUAL", b("1")), cmpc(m, 0)]

    def later(m):  # the level every acquisition after a key's first one takes
        return base(m) + [cmpv(last, "GREATER", b("q")), cmpv(last, "LESS", b("q0000002"))]

    def first(m):  # the key's first entry
        return base(m) + [cmpc(last, 0)]

    def nest(levels, m):
        t = {"compare": levels[-1], "success": ops(m), "failure": diag(m)}
        for cmp in reversed(levels[:-1]):
            t = {"compare": cmp, "success": ops(m), "failure": [{"request_txn": t}]}
        return t

    acquire = {
        "A: the acquire Txn as sent (2 levels; the 2nd runs)": lambda m: nest([first(m), later(m)], m),
        "B: A with its two levels swapped (the 1st runs)": lambda m: nest([later(m), first(m)], m),
        "C: B's first level alone (no failure branch)":
            lambda m: {"compare": later(m), "success": ops(m), "failure": []},
        "D: C without its two sorted ranges":
            lambda m: {"compare": later(m), "success": ops(m, ranges=False), "failure": []},
        "E: D without the marker's put and compares":
            lambda m: {"compare": base(m), "success": ops(m, ranges=False, mark=False), "failure": []},
        "F: a Txn of one put (the entry's), no compare":
            lambda m: {"compare": [], "success": ops(m, ranges=False, mark=False), "failure": []},
    }

    def release(m, c, pred, flat):
        done = [{"request_put": {"key": m, "value": b("R 0000001 %020d" % ((1 << 40) | c))}}]
        if pred:
            done.append({"request_delete_range": {"key": pred, "prev_kv": False}})
        inner = {"compare": [cmpc(m, 0), {"key": last, "target": "MOD", "result": "EQUAL",
                                          "mod_revision": str(c)}],
                 "success": done, "failure": [{"request_range": {"key": m}}]}
        return {"compare": [cmpc(m, c), {"key": m, "target": "LEASE", "result": "EQUAL",
                                         "lease": str(lease)}],
                "success": done, "failure": [] if flat else [{"request_txn": inner}]}

    rel_names = ["R: the release Txn as sent", "S: R without its failure branch"]
    times = {k: [] for k in list(acquire) + rel_names + ["L: etcd's lock service, lock + unlock"]}
    m0 = entry(1)
    r0 = post("/v3/kv/txn", acquire["A: the acquire Txn as sent (2 levels; the 2nd runs)"](m0))
    post("/v3/kv/txn", release(m0, int(r0["header"]["revision"]), None, False))
    pred, i, names = m0, 1, list(acquire)
    for _ in range(rounds):
        random.shuffle(names)
        for name in names:
            i += 1
            m = entry(i)
            t0 = time.perf_counter()
            c = int(post("/v3/kv/txn", acquire[name](m))["header"]["revision"])
            t1 = time.perf_counter()
            flat = random.random() < 0.5
            t2 = time.perf_counter()
            post("/v3/kv/txn", release(m, c, pred, flat))
            t3 = time.perf_counter()
            pred = m
            times[name].append(t1 - t0)
            times[rel_names[flat]].append(t3 - t2)
        t0 = time.perf_counter()
        k = post("/v3/lock/lock", {"name": b("s-lock"), "lease": str(lock_lease)})["key"]
        post("/v3/lock/unlock", {"key": k})
        times["L: etcd's lock service, lock + unlock"].append(time.perf_counter() - t0)
    one = statistics.median(times["F: a Txn of one put (the entry's), no compare"])
    print(f"etcd_shapes.py: {rounds} rounds; medians, and against F (a Txn of one put)")
    for k, v in times.items():
        med = statistics.median(v)
        print(f"{k:55s} {med * 1e3:6.2f} ms  {med / one:5.2f}x  (n={len(v)})")


main()

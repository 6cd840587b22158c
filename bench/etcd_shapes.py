#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""etcd_shapes.py - where the time of fencelock's acquire and release Txns
goes inside etcd (question 9, issue 28's lock-service target).

fb_etcd shows fencelock's calls within 1.1x of raw Txns of their own shapes;
the pair against etcd's lock service (lock + unlock) is the target in
question.  This script takes the Txns that src/etcd/lock.c sends (since
418b65a: a waiting acquisition's one level with an empty failure branch, a
try's two, the release without its nested expiry branch) apart, one piece
at a time (down to what an acquire without the marker and a release that
deletes its entry instead of leaving "R E T" would cost), and times each
variant against a Txn of one put and the lock service, interleaved in
random order, on one kept-alive connection to a three-member loopback
cluster it starts (private ports and data directory, stopped at the end).  Beside them: the shapes sent before 418b65a (at
24ac220), a Txn of the shape of etcd's own lock (concurrency.Mutex: one
compare, a put on a lease and the oldest key of the prefix; the other
branch a get and the same range) and its unlock (a delete).  The keys and
values are as long as the library's under the prefix "bench" (etcd reads
every byte of a Txn).  The queue is kept as the library keeps it (each
release rewrites its entry "R E T" and deletes the one before), so every
variant sees one released entry.  The client is Python: its own cost is
the same for every variant, so compare the differences.

Every entry has a name of its own, and etcd keeps a deleted key in its
index until the next compaction: a range over the queue (the acquire's
range of the two newest entries, a try's compares of every entry) walks the
entries of every acquisition since then.  So that the variants measure
their shapes, not the history, the cluster is compacted after every round
(untimed).  --history measures that walk instead: the waiting acquire as
sent (A) against A without its range (D) and the try (T), in blocks of 250
acquisitions with no compaction, then after one.

  bench/etcd_shapes.py [ROUNDS]      (default 200; needs etcd on PATH)
  bench/etcd_shapes.py --history [BLOCKS]    (default 8)
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
    args = sys.argv[1:]
    history = "--history" in args
    args = [a for a in args if a != "--history"]
    rounds = int(args[0]) if args else (8 if history else 200)
    tmp = tempfile.mkdtemp(prefix="flshapes.")
    procs, port = start_cluster(tmp)
    try:
        run(rounds, port, history)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def run(rounds, port, history):
    conn = None
    for _ in range(100):  # until a leader answers
        try:
            conn = Conn(port)
            conn.post("/v3/kv/put", {"key": b("bench/epoch"), "value": b("1")})
            break
        except (OSError, RuntimeError, http.client.HTTPException):
            conn = None
            time.sleep(0.1)
    if conn is None:
        sys.exit("etcd_shapes: the cluster did not answer")
    post = conn.post
    ep, last = b("bench/epoch"), b("bench/last/k")
    q0, q1 = b(b"bench/lock/k\0"), b(b"bench/lock/k\1")
    lease = int(post("/v3/lease/grant", {"TTL": "600"})["ID"])
    lock_lease = int(post("/v3/lease/grant", {"TTL": "600"})["ID"])
    mutex_lease = int(post("/v3/lease/grant", {"TTL": "600"})["ID"])
    # backend.c's host and entry.c's live value
    host = "".join(ch if " " < ch <= "~" else "?" for ch in socket.gethostname()[:64]) or "?"
    live = b("W 0000001 %d %s" % (os.getpid(), host))
    post("/v3/kv/put", {"key": last, "value": b("q0000001")})  # the key's first entry made

    def entry(i):  # entry.c's 32 hex digits
        return b(b"bench/lock/k\0" + b"%016x%016x" % (0xbe4c4, i))

    def cmpv(k, res, v, end=None):
        c = {"key": k, "target": "VALUE", "result": res, "value": v}
        if end:
            c["range_end"] = end
        return c

    def cmpc(k, rev, end=None):
        c = {"key": k, "target": "CREATE", "result": "EQUAL", "create_revision": str(rev)}
        if end:
            c["range_end"] = end
        return c

    def rng(desc, lim):
        return {"request_range": {"key": q0, "range_end": q1,
                                  "sort_order": "DESCEND" if desc else "ASCEND",
                                  "sort_target": "CREATE", "limit": str(lim)}}

    def put_entry(m):
        return {"request_put": {"key": m, "value": live, "lease": str(lease)}}

    def put_mark(prev=True):
        p = {"key": last, "value": b("q0000001")}
        if prev:
            p["prev_kv"] = True
        return {"request_put": p}

    def ops(m, rnge=True, mark=True, prev=True):  # fl__enqueue_ops
        return ([rng(True, 2)] if rnge else []) + [put_entry(m)] + ([put_mark(prev)] if mark else [])

    def base(m):  # the epoch ours, our entry absent
        return [cmpv(ep, "EQUAL", b("1")), cmpc(m, 0)]

    def markok():  # "q" < marker < "q%07(E+1)"
        return [cmpv(last, "GREATER", b("q")), cmpv(last, "LESS", b("q0000002"))]

    def released():  # every entry's value below "W"
        return [cmpv(q0, "LESS", b("W"), q1)]

    def empty():  # no entry
        return [cmpc(q0, 0, q1)]

    def txn(cmp, success, failure):
        return {"compare": cmp, "success": success, "failure": failure}

    def try_as_sent(m):
        inner = txn(base(m) + markok() + empty(), ops(m), [rng(False, 2)])
        return txn(base(m) + markok() + released(), ops(m), [{"request_txn": inner}])

    # The shapes at 24ac220 (before 418b65a), as fb_etcd sent them then.
    def old_ops(m):
        return [rng(True, 1), rng(False, 2), put_entry(m), put_mark()]

    def old_diag(m):
        return [{"request_range": {"key": ep}}, {"request_range": {"key": last}},
                {"request_range": {"key": m}}, rng(True, 1), rng(False, 2)]

    def old_nest(levels, m):
        t = txn(levels[-1], old_ops(m), old_diag(m))
        for cmp in reversed(levels[:-1]):
            t = txn(cmp, old_ops(m), [{"request_txn": t}])
        return t

    def old_acquire(m):
        return old_nest([base(m) + [cmpc(last, 0)], base(m) + markok()], m)

    def old_try(m):
        return old_nest([base(m) + [cmpc(last, 0)] + empty(), base(m) + markok() + empty(),
                         base(m) + markok() + released()], m)

    acquire = {
        "A: the waiting acquire Txn as sent (one level)": lambda m: txn(base(m) + markok(), ops(m), []),
        "A1: A without the marker's prev_kv": lambda m: txn(base(m) + markok(), ops(m, prev=False), []),
        "A2: A without the marker's two compares": lambda m: txn(base(m), ops(m), []),
        "G: A without the marker (its put and its two compares)":
            lambda m: txn(base(m), ops(m, mark=False), []),
        "D: A without its sorted range":
            lambda m: txn(base(m) + markok(), ops(m, rnge=False), []),
        "E: D without the marker's put and compares":
            lambda m: txn(base(m), ops(m, rnge=False, mark=False), []),
        "F: a Txn of one put (the entry's, on a lease), no compare":
            lambda m: txn([], ops(m, rnge=False, mark=False), []),
        "T: the try's acquire Txn as sent (2 levels; the 1st runs)": try_as_sent,
        "T1: T without its failure branch (the nested level)":
            lambda m: txn(base(m) + markok() + released(), ops(m), []),
        "A0: the waiting acquire Txn at 24ac220 (2 levels; the 2nd runs)": old_acquire,
        "T0: the try's Txn at 24ac220 (3 levels; the 3rd runs)": old_try,
    }

    def release(m, c, pred, kind):
        done = [{"request_put": {"key": m, "value": b("R 0000001 %020d" % ((1 << 40) | c))}}]
        if pred and kind not in ("S2", "S3"):
            done.append({"request_delete_range": {"key": pred, "prev_kv": False}})
        if kind == "S3":  # no record left: our entry deleted
            done = [{"request_delete_range": {"key": m, "prev_kv": False}}]
        cmp = [cmpc(m, c), {"key": m, "target": "LEASE", "result": "EQUAL", "lease": str(lease)}]
        fail = [{"request_range": {"key": m}}]
        if kind == "R0":  # 24ac220: the expiry case nested in the failure branch
            inner = txn([cmpc(m, 0), {"key": last, "target": "MOD", "result": "EQUAL",
                                      "mod_revision": str(c)}], done, fail)
            fail = [{"request_txn": inner}]
        elif kind in ("S", "S2", "S3"):
            fail = []
        return txn(cmp, done, fail)

    rel_names = {"R": "R: the release Txn as sent", "S": "S: R without its failure branch",
                 "S2": "S2: S without the delete of the released entry before",
                 "S3": "S3: S2 deleting our entry instead of rewriting it",
                 "R0": "R0: the release Txn at 24ac220 (nested expiry branch)"}
    mutex = {"K: a Txn of concurrency.Mutex's lock shape": None,
             "U: a delete of its key (the lock service's unlock)": None}
    lock_name = "L: etcd's lock service, lock + unlock"
    times = {k: [] for k in list(acquire) + list(rel_names.values()) + list(mutex) + [lock_name]}
    sizes = {}
    pfx = "bench/mutex/"
    mkey = b(pfx + "%x" % mutex_lease)
    mend = b(pfx[:-1] + "0")

    def mutex_lock():  # clientv3/concurrency/mutex.go, Lock
        owner = {"request_range": {"key": b(pfx), "range_end": mend, "sort_order": "ASCEND",
                                   "sort_target": "CREATE", "limit": "1"}}
        return txn([cmpc(mkey, 0)],
                   [{"request_put": {"key": mkey, "value": "", "lease": str(mutex_lease)}}, owner],
                   [{"request_range": {"key": mkey}}, owner])

    def went_ahead(r):  # this level, or the one nested in its failure branch
        while not r.get("succeeded"):
            resp = r.get("responses") or [{}]
            r = resp[0].get("response_txn")
            if r is None:
                return False
        return True

    m0 = entry(1)
    r0 = post("/v3/kv/txn", acquire["A: the waiting acquire Txn as sent (one level)"](m0))
    post("/v3/kv/txn", release(m0, int(r0["header"]["revision"]), None, "R"))
    pred, i, names = m0, 1, list(acquire)

    def compact(rev):  # untimed; then a read, as the next request would find it
        post("/v3/kv/compaction", {"revision": str(rev), "physical": True})
        post("/v3/kv/range", {"key": ep})

    if history:
        hist = {"A": acquire["A: the waiting acquire Txn as sent (one level)"],
                "D": acquire["D: A without its sorted range"],
                "T": try_as_sent}
        print(f"etcd_shapes.py --history: blocks of 250 acquisitions of each of A (the waiting "
              f"acquire as sent), D (A without its range) and T (the try as sent); medians")
        compact(int(post("/v3/kv/range", {"key": ep})["header"]["revision"]))
        since = 0
        for blk in range(rounds + 2):
            if blk == rounds:
                compact(rev)
                since = 0
                print("compacted")
            t = {k: [] for k in hist}
            for _ in range(250):
                order = list(hist)
                random.shuffle(order)
                for k in order:
                    i += 1
                    m = entry(i)
                    t0 = time.perf_counter()
                    r = post("/v3/kv/txn", hist[k](m))
                    t[k].append(time.perf_counter() - t0)
                    if not went_ahead(r):
                        raise RuntimeError(f"{k}: did not go ahead")
                    rev = int(r["header"]["revision"])
                    post("/v3/kv/txn", release(m, rev, pred, "R"))
                    pred = m
                    since += 1
            md = {k: statistics.median(v) * 1e3 for k, v in t.items()}
            print(f"entries since the last compaction {since - 750:5d}-{since:5d}: A {md['A']:.2f} ms, "
                  f"D {md['D']:.2f} ms, T {md['T']:.2f} ms; A - D {md['A'] - md['D']:+.2f} ms, "
                  f"T - A {md['T'] - md['A']:+.2f} ms", flush=True)
        return

    for _ in range(rounds):
        random.shuffle(names)
        for name in names:
            i += 1
            m = entry(i)
            body = acquire[name](m)
            sizes.setdefault(name, len(json.dumps(body, separators=(",", ":"))))
            t0 = time.perf_counter()
            r = post("/v3/kv/txn", body)
            t1 = time.perf_counter()
            if not went_ahead(r):
                raise RuntimeError(f"{name}: did not go ahead")
            c = int(r["header"]["revision"])
            kind = random.choice(list(rel_names))
            body = release(m, c, pred, kind)
            sizes.setdefault(rel_names[kind], len(json.dumps(body, separators=(",", ":"))))
            t2 = time.perf_counter()
            r = post("/v3/kv/txn", body)
            t3 = time.perf_counter()
            if not r.get("succeeded"):
                raise RuntimeError(f"release {kind}: refused")
            if kind in ("S2", "S3"):  # what this release's delete would have removed
                post("/v3/kv/deleterange", {"key": pred})
            if kind == "S3":  # the released entry the next acquisition finds
                post("/v3/kv/put", {"key": m, "value": b("R 0000001 %020d" % ((1 << 40) | c))})
            pred = m
            times[name].append(t1 - t0)
            times[rel_names[kind]].append(t3 - t2)
        compact(int(r["header"]["revision"]))
        order = [0, 1]
        random.shuffle(order)
        for o in order:
            if o == 0:
                t0 = time.perf_counter()
                k = post("/v3/lock/lock", {"name": b("bench/svc"), "lease": str(lock_lease)})["key"]
                post("/v3/lock/unlock", {"key": k})
                times[lock_name].append(time.perf_counter() - t0)
            else:
                body = mutex_lock()
                t0 = time.perf_counter()
                r = post("/v3/kv/txn", body)
                t1 = time.perf_counter()
                if not r.get("succeeded"):
                    raise RuntimeError("mutex lock: key held")
                post("/v3/kv/deleterange", {"key": mkey})
                t2 = time.perf_counter()
                sizes.setdefault("K: a Txn of concurrency.Mutex's lock shape",
                                 len(json.dumps(body, separators=(",", ":"))))
                times["K: a Txn of concurrency.Mutex's lock shape"].append(t1 - t0)
                times["U: a delete of its key (the lock service's unlock)"].append(t2 - t1)
    one = statistics.median(times["F: a Txn of one put (the entry's, on a lease), no compare"])
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"etcd_shapes.py: {rounds} rounds, compacted after each; medians, and against F "
          f"(a Txn of one put)")
    for k, v in times.items():
        size = f"{sizes[k]:5d} B" if k in sizes else "       "
        print(f"{k:66s} {med[k] * 1e3:6.2f} ms  {med[k] / one:5.2f}x  {size}  (n={len(v)})")
    L = med[lock_name]
    for a, r in (("A: the waiting acquire Txn as sent (one level)", "R: the release Txn as sent"),
                 ("T: the try's acquire Txn as sent (2 levels; the 1st runs)",
                  "R: the release Txn as sent"),
                 ("A0: the waiting acquire Txn at 24ac220 (2 levels; the 2nd runs)",
                  "R0: the release Txn at 24ac220 (nested expiry branch)")):
        print(f"({a[:a.index(':')]} + {r[:r.index(':')]}) / L: {(med[a] + med[r]) / L:5.2f}x")
    K = med["K: a Txn of concurrency.Mutex's lock shape"]
    U = med["U: a delete of its key (the lock service's unlock)"]
    print(f"2 x F / L: {2 * one / L:5.2f}x   (K + U) / L: {(K + U) / L:5.2f}x")


main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""linz_checker.py - proves the linearizability checker (linz.c,
`fl_chaos --check-history`) is not vacuous and not too strict.

Hand-made histories of acquisitions, commits, reads and releases (times in
milliseconds here, nanoseconds in the file): each good one -- concurrency,
unknown outcomes (EAGAIN, no answer) that did or did not take effect, even
late -- must pass; each bad one must fail naming its rule (linz.h lists
them).  Usage: linz_checker.py PATH/TO/fl_chaos
"""
import os
import subprocess
import sys
import tempfile

CHAOS = sys.argv[1]
FAILED = []


def history(ops):
    """ops: (client, op, inv_ms, resp_ms or None, result, fields) -> text."""
    lines = []
    for client, op, inv, resp, res, fields in ops:
        r = '-' if resp is None else str(int(resp * 1e6) + 10**9)
        lines.append('%s %s %d %s %s %s' % (client, op, int(inv * 1e6) + 10**9, r,
                                            '-' if resp is None else res, fields))
    return '\n'.join(lines) + '\n'


def check(name, ops, want):
    """want: None (must pass) or the rule that must be named."""
    with tempfile.NamedTemporaryFile('w', suffix='.hist', delete=False) as f:
        f.write(ops if isinstance(ops, str) else history(ops))
        path = f.name
    p = subprocess.run([CHAOS, '--check-history', path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    os.unlink(path)
    if want is None:
        ok = p.returncode == 0
    else:
        ok = p.returncode == 1 and ('VIOLATION %s:' % want) in p.stdout
    print('%-4s %-44s %s' % ('ok' if ok else 'FAIL', name, want or 'passes'))
    if not ok:
        FAILED.append(name)
        print('     exit %d; output:\n%s' % (p.returncode, p.stdout))


# Building blocks: a lease of key k for client c with token t from a to b.
def acq(c, t, a, b, key='k'):
    return (c, 'acquire', a, b, 'ok', 'key=%s token=%d' % (key, t))


def com(c, t, v, a, b, res='ok', strict=0, acc=None, rec='r', key='k'):
    f = 'key=%s rec=%s token=%d strict=%d value=%s' % (key, rec, t, strict, v)
    if acc is not None:
        f += ' acc=%d' % acc
    elif res == 'ok':
        f += ' acc=%d' % t
    return (c, 'commit', a, b, res, f)


def read(c, v, fence, a, b, rec='r', res='ok'):
    if res != 'ok':
        return (c, 'read', a, b, res, 'rec=%s' % rec)
    return (c, 'read', a, b, 'ok', 'rec=%s value=%s fence=%d' % (rec, v, fence))


def rel(c, t, a, b, res='ok', key='k'):
    return (c, 'release', a, b, res, 'key=%s token=%d' % (key, t))


# ---- good histories: each must pass ----
check('handover with a stale writer', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3), read('c2', 'a', 3, 4, 5), rel('c1', 3, 6, 7),
    acq('c2', 5, 8, 9), com('c2', 5, 'b', 10, 11, strict=1),
    com('c1', 3, 'c', 12, 13, res='ESTALE', acc=5), read('c3', 'b', 5, 14, 15),
    rel('c1', 3, 16, 17, res='ESTALE'), rel('c2', 5, 18, 19)], None)
check('reads overlapping a commit see old or new', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3), acq('c2', 5, 4, 5),
    com('c2', 5, 'b', 10, 20), read('c3', 'b', 5, 11, 12), read('c4', 'b', 5, 13, 14),
    read('c5', 'a', 3, 9, 30)], None)
check('ENOENT before the first commit, concurrent', [
    acq('c1', 3, 0, 1), read('c2', None, 0, 1, 6, res='ENOENT'), com('c1', 3, 'a', 2, 5),
    read('c2', 'a', 3, 7, 8)], None)
check('unknown commit seen later (took effect)', [
    acq('c1', 3, 0, 1), com('c1', 3, 'm', 2, 3, res='EAGAIN'), read('c2', 'm', 3, 10, 11)], None)
check('unknown commit never seen (no effect)', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3), com('c1', 3, 'm', 4, 5, res='EAGAIN'),
    read('c2', 'a', 3, 10, 11), read('c2', 'a', 3, 12, 13)], None)
check('unknown commit applied after its answer', [
    acq('c1', 3, 0, 1), com('c1', 3, 'm', 2, 3, res='EAGAIN'),
    read('c2', None, 0, 5, 6, res='ENOENT'), read('c2', 'm', 3, 8, 9)], None)
check('a commit with no answer at all (client gone)', [
    acq('c1', 3, 0, 1), com('c1', 3, 'm', 2, None, res='-'), read('c2', 'm', 3, 8, 9)], None)
check('rejection names an unknown commit\'s token', [
    acq('c1', 3, 0, 1), com('c1', 3, 'm', 2, 3, res='EAGAIN'), acq('c2', 2, -2, -1),
    com('c2', 2, 'x', 4, 5, res='ESTALE', strict=1, acc=3)], None)
check('unknown commit earlier than a later one of its lease', [
    acq('c1', 3, 0, 1), com('c1', 3, 'm', 2, 3, res='EAGAIN'), acq('c2', 2, -4, -3),
    com('c2', 2, 'x', 4, 5, res='ESTALE', acc=3), com('c1', 3, 'a', 6, 7)], None)
check('no-effect errors and failed reads say nothing', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3), com('c1', 3, 'n', 4, 5, res='EHOSTUNREACH'),
    read('c2', None, 0, 6, 7, res='EHOSTUNREACH'), read('c2', 'a', 3, 8, 9),
    ('c3', 'acquire', 10, 11, 'EAGAIN', 'key=k'), acq('c3', 4, 12, 13),
    com('c3', 4, 'b', 14, 15, strict=1), read('c2', 'b', 4, 16, 17)], None)
check('two records, two keys, interleaved', [
    acq('c1', 3, 0, 1), acq('c2', 4, 0, 1, key='j'), com('c1', 3, 'a', 2, 3),
    com('c2', 4, 'b', 2, 3, rec='q', key='j'), read('c3', 'a', 3, 4, 5),
    read('c3', 'b', 4, 4, 5, rec='q')], None)

# ---- bad histories: each must be rejected, naming the rule ----
check('a token handed out twice', [acq('c1', 5, 0, 1), acq('c2', 5, 2, 3)],
      'token-duplicate')
check('a smaller token after a greater one', [acq('c1', 7, 0, 1), acq('c2', 6, 2, 3)],
      'token-order')
check('a release ok after a takeover', [
    acq('c1', 1, 0, 1), acq('c2', 2, 5, 6), rel('c1', 1, 7, 8)], 'release-late')
check('a commit with a token never issued', [com('c1', 9, 'a', 2, 3)], 'commit-unissued')
check('an accepted commit reporting another token', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3, acc=2)], 'commit-acc')
check('a smaller token accepted after a greater one', [
    acq('c1', 3, 0, 1), acq('c2', 5, 1, 2), com('c2', 5, 'b', 2, 3),
    com('c1', 3, 'a', 4, 5)], 'commit-order')
check('a strict commit accepted at its own fence', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3), com('c1', 3, 'b', 4, 5, strict=1)],
      'commit-order')
check('a rejection below its own token', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3, res='ESTALE', acc=3)], 'reject-wrong')
check('a rejection naming a token nobody committed', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3, res='ESTALE', acc=9)], 'reject-unwritten')
check('a read of a value nobody wrote', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3), read('c2', 'zz', 3, 4, 5)], 'read-unknown')
check('a read of a rejected value', [
    acq('c1', 3, 0, 1), acq('c2', 5, 2, 3), com('c2', 5, 'b', 4, 5),
    com('c1', 3, 'a', 6, 7, res='ESTALE', acc=5), read('c3', 'a', 3, 8, 9)], 'read-rejected')
check('a read of a commit that had no effect', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3, res='EHOSTUNREACH'),
    read('c2', 'a', 3, 4, 5)], 'read-noeffect')
check('a read whose fence is not its value\'s token', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3), read('c2', 'a', 4, 4, 5)], 'read-fence')
check('a read of a commit from the future', [
    acq('c1', 3, 0, 1), read('c2', 'a', 3, 1, 1.5), com('c1', 3, 'a', 2, 3)], 'read-future')
check('a stale read after a newer commit returned', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3), acq('c2', 5, 4, 5), com('c2', 5, 'b', 6, 7),
    read('c3', 'a', 3, 8, 9)], 'read-stale')
check('a lost commit: ENOENT after it returned', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3), read('c2', None, 0, 4, 5, res='ENOENT')],
      'read-stale')
check('reads that disagree on the order (new, then old)', [
    acq('c1', 3, 0, 1), acq('c2', 5, 0, 1), com('c1', 3, 'a', 2, 20), com('c2', 5, 'b', 2, 20),
    read('c3', 'b', 5, 4, 5), read('c3', 'a', 3, 6, 7)], 'linearizability')
check('an unknown commit seen, then gone', [
    acq('c1', 3, 0, 1), com('c1', 3, 'm', 2, 3, res='EAGAIN'), read('c2', 'm', 3, 4, 5),
    read('c2', None, 0, 6, 7, res='ENOENT')], 'linearizability')
check('a rejection before the commit it names', [
    acq('c1', 3, 0, 1), com('c1', 3, 'a', 2, 3), acq('c2', 5, 4, 5), acq('c3', 2, -2, -1),
    com('c3', 2, 'x', 6, 7, res='ESTALE', acc=5), com('c2', 5, 'b', 10, 11)],
      'linearizability')
check('a malformed line', 'c1 commit 1000 900 ok key=k rec=r token=1 value=a\n',
      'bad-history')

if FAILED:
    print('FAILED: %d case(s): %s' % (len(FAILED), ', '.join(FAILED)))
    sys.exit(1)
print('all linearizability checker cases behave')

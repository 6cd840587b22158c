#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""chaos_checker.py - proves the chaos checker is not vacuous.

Runs one short chaos run (no stress, frequent worker kills) that must pass,
then, on copies of its logs, forges one kind of broken history at a time --
a duplicated token, a lease taken early, a rejected value read, a stale read,
a lost commit, a death not reported, a wait on a free lock, a busy wait, an
accepted other-key commit, ... -- and requires `fl_chaos --check` to exit 1
naming the expected violation.  Usage: chaos_checker.py PATH/TO/fl_chaos
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHAOS = sys.argv[1]
FAILED = []


def run(args):
    p = subprocess.run([CHAOS] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    return p.returncode, p.stdout


class Log:
    """One worker log: lines, and its operations (B line index, A line index)."""

    def __init__(self, path):
        self.path = path
        with open(path) as f:
            self.lines = f.read().splitlines()
        self.ops = []  # dicts: kind, b, a (line indexes), fields
        open_b = None
        for i, line in enumerate(self.lines):
            parts = line.split()
            if parts[0] == 'B':
                open_b = {'kind': parts[3], 'b': i, 'a': None, 'bf': kv(parts), 'af': {},
                          'tb': int(parts[2]), 'ta': None}
                self.ops.append(open_b)
            elif parts[0] == 'A' and open_b is not None:
                open_b['a'] = i
                open_b['af'] = kv(parts)
                open_b['ta'] = int(parts[2])
                open_b = None

    def set(self, idx, key, value):
        self.lines[idx] = re.sub(r'\b%s=\S+' % key, '%s=%s' % (key, value), self.lines[idx])

    def set_time(self, idx, t):
        parts = self.lines[idx].split(' ')
        parts[2] = str(t)
        self.lines[idx] = ' '.join(parts)

    def save(self):
        with open(self.path, 'w') as f:
            f.write('\n'.join(self.lines) + '\n')


def kv(parts):
    d = {}
    for p in parts[4:]:
        if '=' in p:
            k, v = p.split('=', 1)
            d[k] = v
    return d


def logs(d):
    out = {}
    for name in sorted(os.listdir(d)):
        if re.fullmatch(r'w\d+\.log|final\.log', name):
            out[name] = Log(os.path.join(d, name))
    return out


def done(op, rc=None):
    return op['a'] is not None and (rc is None or op['af'].get('rc') == str(rc))


def mutation(base, name, expect, fn):
    d = tempfile.mkdtemp(prefix='flchaos-mut.')
    try:
        shutil.rmtree(d)
        shutil.copytree(base, d)
        ls = logs(d)
        if fn(d, ls) is False:
            print('SKIP %-32s (no suitable operation in the base run)' % name)
            return
        rc, out = run(['--check', d])
        if rc == 1 and any(e in out for e in expect.split('|')):
            print('ok   %-32s -> %s' % (name, expect))
        else:
            FAILED.append(name)
            print('FAIL %-32s expected exit 1 and "%s"; got exit %d:\n%s' % (name, expect, rc,
                                                                           out[-3000:]))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def all_ops(ls, kind=None):
    for name, l in ls.items():
        if name == 'final.log':
            continue
        for op in l.ops:
            if kind is None or op['kind'] == kind:
                yield l, op


# ---- the forgeries ------------------------------------------------------------------

def dup_token(d, ls):
    acqs = [(l, op) for l, op in all_ops(ls, 'acq') if done(op, 0)]
    for (l1, o1) in acqs:
        for (l2, o2) in acqs:
            if o2['bf']['key'] == o1['bf']['key'] and o2['tb'] > o1['ta'] + 10**9:
                l2.set(o2['a'], 'tok', o1['af']['tok'])
                l2.save()
                return True
    return False


def token_order(d, ls):
    acqs = [(l, op) for l, op in all_ops(ls, 'acq') if done(op, 0)]
    for (l1, o1) in acqs:
        for (l2, o2) in acqs:
            if o2['bf']['key'] == o1['bf']['key'] and o2['tb'] > o1['ta'] + 10**9:
                l2.set(o2['a'], 'tok', str(int(o1['af']['tok']) - 1))
                l2.save()
                return True
    return False


def long_deadline(d, ls):
    # a takeover (FL_LEASE_EXPIRED) whose previous holder now claims a deadline
    # beyond it: the takeover returned inside a certainly-held lease
    with open(os.path.join(d, 'controller.log')) as f:
        killed = set(re.findall(r' kill w=(\d+) ', f.read()))
    acqs = {}
    for l, op in all_ops(ls, 'acq'):
        if done(op, 0):
            acqs[(op['bf']['key'], int(op['af']['tok']))] = (l, op)
    for (key, tok), (l, y) in sorted(acqs.items()):
        if y['af'].get('fl') != '1' or (key, tok - 1) not in acqs:
            continue
        lp, p = acqs[(key, tok - 1)]
        if re.match(r'w(\d+)', os.path.basename(lp.path)).group(1) in killed:
            continue
        after = lp.ops[lp.ops.index(p) + 1:]
        stop = None
        for o in after:
            if o['kind'] in ('acq', 'close'):
                break
            if o['kind'] in ('renew', 'release'):
                stop = o
                break
        if stop is not None and (stop['kind'] == 'renew' or stop['tb'] <= y['ta']):
            continue
        lp.set(p['a'], 'dl', str(y['ta'] + 50 * 10**6))
        lp.save()
        return True
    return False


def rejected_accepted(d, ls):
    # a commit rejected because a newer token was visible is reported as accepted
    for l, op in all_ops(ls, 'commit'):
        if done(op, -116) and op['bf'].get('strict') == '0' and op['bf'].get('xkey') == '0':
            l.set(op['a'], 'rc', '0')
            l.set(op['a'], 'acc', op['bf']['tok'])
            l.save()
            return True
    return False


def rejected_read(d, ls):
    # a read returns the value of a rejected commit
    rejected = [(l, op) for l, op in all_ops(ls, 'commit')
                if done(op, -116) and op['bf'].get('xkey') == '0']
    for l, rd in all_ops(ls, 'read'):
        if not done(rd, 0) or rd['af'].get('ok') != '1':
            continue
        for lc, c in rejected:
            if c['bf']['rec'] == rd['bf']['rec'] and c['tb'] < rd['tb']:
                w = re.match(r'w(\d+)\.log', os.path.basename(lc.path)).group(1)
                for k, v in (('w', w), ('seq', c['bf']['seq']), ('vtok', c['bf']['tok']),
                             ('fence', c['bf']['tok']), ('sum', c['bf']['sum']),
                             ('len', c['bf']['len'])):
                    l.set(rd['a'], k, v)
                l.save()
                return True
    return False


def stale_read(d, ls):
    # a read returns a value older than one acknowledged before it was called
    acked = [(l, op) for l, op in all_ops(ls, 'commit')
             if done(op, 0) and op['bf'].get('xkey') == '0']
    for l, rd in all_ops(ls, 'read'):
        if not done(rd, 0) or rd['af'].get('ok') != '1':
            continue
        old = [(lc, c) for lc, c in acked if c['bf']['rec'] == rd['bf']['rec']
               and c['ta'] < rd['tb'] - 10**9 and int(c['bf']['tok']) < int(rd['af']['vtok'])]
        if old:
            lc, c = old[0]
            w = re.match(r'w(\d+)\.log', os.path.basename(lc.path)).group(1)
            for k, v in (('w', w), ('seq', c['bf']['seq']), ('vtok', c['bf']['tok']),
                         ('fence', c['bf']['tok']), ('sum', c['bf']['sum']),
                         ('len', c['bf']['len'])):
                l.set(rd['a'], k, v)
            l.save()
            return True
    return False


def lost_commit(d, ls):
    # the final value is an older acknowledged commit
    fin = ls['final.log']
    reads = [op for op in fin.ops if op['kind'] == 'read' and done(op, 0)]
    if not reads:
        return False
    rd = reads[0]
    acked = [(l, op) for l, op in all_ops(ls, 'commit')
             if done(op, 0) and op['bf']['rec'] == rd['bf']['rec']
             and int(op['bf']['tok']) < int(rd['af']['vtok'])]
    if not acked:
        return False
    lc, c = acked[0]
    w = re.match(r'w(\d+)\.log', os.path.basename(lc.path)).group(1)
    for k, v in (('w', w), ('seq', c['bf']['seq']), ('vtok', c['bf']['tok']),
                 ('fence', c['bf']['tok']), ('sum', c['bf']['sum']), ('len', c['bf']['len'])):
        fin.set(rd['a'], k, v)
    fin.save()
    return True


def torn_read(d, ls):
    for l, rd in all_ops(ls, 'read'):
        if done(rd, 0) and rd['af'].get('ok') == '1':
            l.lines[rd['a']] += ' ok=0 why=checksum_mismatch hex=00'
            l.lines[rd['a']] = l.lines[rd['a']].replace(' ok=1', '')
            l.save()
            return True
    return False


def death_unreported(d, ls):
    # every owner-died handoff loses its flag (one at least came before the
    # dead holder's deadline)
    changed = set()
    for l, op in all_ops(ls, 'acq'):
        if done(op, 0) and op['af'].get('fl') == '2':
            l.set(op['a'], 'fl', '0')
            changed.add(l)
    for l in changed:
        l.save()
    return bool(changed)


def flag_after_release(d, ls):
    # OWNER_DIED claimed right after a clean release
    rel = {}
    for l, op in all_ops(ls):
        if op['kind'] == 'release' and done(op, 0):
            rel.setdefault(op['bf']['key'], []).append(int(op['bf']['tok']))
    for l, op in all_ops(ls, 'acq'):
        if done(op, 0) and op['af'].get('fl') == '0':
            tok = int(op['af']['tok'])
            if tok - 1 in rel.get(op['bf']['key'], []):
                l.set(op['a'], 'fl', '2')
                l.save()
                return True
    return False


def free_wait(d, ls):
    # a waiter that sleeps 3 s after everything ended: the lock was free
    ctl = os.path.join(d, 'controller.log')
    with open(ctl) as f:
        lines = f.read().splitlines()
    t = max(int(x.split()[0]) for x in lines) + 10**9
    with open(ctl, 'a') as f:
        f.write('%d wstart slot=0 w=999 pid=1\n%d kill w=999 pid=1 paused=0\n'
                '%d wexit w=999 pid=1 status=9 exited=0 code=-1 signal=9 expected=1 cpu=0\n'
                % (t, t + 3 * 10**9, t + 3 * 10**9))
    with open(os.path.join(d, 'w999.log'), 'w') as f:
        f.write('B 0 %d open pid=1\nA 0 %d open rc=0 reg=1\nB 1 %d acq key=0 lease=50000000 '
                'to=-1\n' % (t, t + 1000, t + 2000))
    return True


def busy_wait(d, ls):
    waits = [(op['ta'] - op['tb'], l, op) for l, op in all_ops(ls, 'acq')
             if done(op) and op['bf']['to'] != '0']
    if not waits:
        return False
    dur, l, op = max(waits, key=lambda x: x[0])
    l.set(op['a'], 'cpu', str(dur * 1000))
    l.save()
    return True


def xkey_accepted(d, ls):
    for l, op in all_ops(ls, 'commit'):
        if done(op, -18) and op['bf'].get('xkey') == '1':
            l.set(op['a'], 'rc', '0')
            l.save()
            return True
    return False


def timeout_overrun(d, ls):
    # a timed-out acquisition that returned 3 s after its timeout
    for l, op in all_ops(ls, 'acq'):
        if done(op, -110):
            l.set_time(op['a'], op['tb'] + int(op['bf']['to']) + 3 * 10**9)
            l.save()
            return True
    return False


def early_timeout(d, ls):
    for l, op in all_ops(ls, 'acq'):
        if done(op, -110) and int(op['bf']['to']) > 20 * 10**6:
            l.set_time(op['a'], op['tb'] + 1000)
            l.save()
            return True
    return False


def deadline_at(l, op):
    """The deadline of the holding op belongs to, as known when op was called."""
    i = l.ops.index(op)
    dl = None
    for o in l.ops[:i]:
        if o['kind'] == 'acq' and done(o, 0):
            dl = int(o['af']['dl'])
        elif o['kind'] == 'renew' and done(o):
            dl = int(o['af']['dl']) if o['af'].get('rc') == '0' else 0
    return dl


def stale_release(d, ls):
    # a release that succeeded before its deadline reported as stale: a live
    # holder lost its lease
    for l, op in all_ops(ls, 'release'):
        if done(op, 0) and (deadline_at(l, op) or 0) > op['ta']:
            l.set(op['a'], 'rc', '-116')
            l.save()
            return True
    return False


def renew_after_deadline(d, ls):
    for l, op in all_ops(ls, 'renew'):
        if done(op, -116) and op['tb'] >= (deadline_at(l, op) or 0):
            l.set(op['a'], 'rc', '0')
            l.lines[op['a']] += ' dl=%d' % (op['ta'] + 50 * 10**6)
            l.save()
            return True
    return False


def release_stale_alone(d, ls):
    # a clean release reported stale although no acquisition with a greater
    # token was called before it returned (preferably one after its deadline,
    # which only this check can see)
    acqs = {}
    inflight = {}
    for name, l in ls.items():
        for op in l.ops:
            if op['kind'] != 'acq':
                continue
            k = op['bf']['key']
            if done(op, 0):
                acqs.setdefault(k, []).append((int(op['af']['tok']), op['tb'], l, op))
            elif not done(op):
                inflight.setdefault(k, []).append(op['tb'])
    found = []
    for k, lst in acqs.items():
        lst.sort(key=lambda x: x[0])
        later_b = [10**30] * (len(lst) + 1)
        for i in range(len(lst) - 1, -1, -1):
            later_b[i] = min(lst[i][1], later_b[i + 1])
        for i, (tok, tb, l, acq) in enumerate(lst):
            if l is ls['final.log']:
                continue
            for o in l.ops[l.ops.index(acq) + 1:]:
                if o['kind'] in ('acq', 'close'):
                    break
                if o['kind'] == 'release' and done(o, 0):
                    if later_b[i + 1] > o['ta'] and not any(
                            acq['tb'] - 5 * 10**9 < b < o['ta'] for b in inflight.get(k, [])):
                        late = o['tb'] >= (deadline_at(l, o) or 0)
                        found.append((not late, l, o))
                    break
    if not found:
        return False
    found.sort(key=lambda x: x[0])
    _, l, o = found[0]
    l.set(o['a'], 'rc', '-116')
    l.save()
    return True


def held_at_end(d, ls):
    fin = ls['final.log']
    for i, line in enumerate(fin.lines):
        if ' lockinfo ' in line:
            fin.set(i, 'state', '1')
            fin.save()
            return True
    return False


def waiters_leak(d, ls):
    fin = ls['final.log']
    for i, line in enumerate(fin.lines):
        if ' lockinfo ' in line:
            fin.set(i, 'waiters', '1000')
            fin.save()
            return True
    return False


def crashed_worker(d, ls):
    # a worker that was never killed "exits" with SIGSEGV
    ctl = os.path.join(d, 'controller.log')
    with open(ctl) as f:
        text = f.read()
    killed = set(re.findall(r' kill w=(\d+) ', text))
    for m in re.finditer(r'^(\d+) wexit w=(\d+) pid=(\d+) .*expected=1', text, re.M):
        if m.group(2) not in killed:
            text = text.replace(m.group(0), '%s wexit w=%s pid=%s status=139 exited=0 code=-1 '
                                'signal=11 expected=0' % (m.group(1), m.group(2), m.group(3)))
            with open(ctl, 'w') as f:
                f.write(text)
            return True
    return False


def below_floor(d, ls):
    # a token of the previous epoch returned after the supervisor published a new floor
    with open(os.path.join(d, 'controller.log')) as f:
        ready = {int(m.group(2)): int(m.group(1)) for m in
                 re.finditer(r' dstart .*ready=(\d+) floor=\d+ epoch=(\d+)', f.read())}
    for l, op in all_ops(ls, 'acq'):
        if not done(op, 0):
            continue
        tok = int(op['af']['tok'])
        epoch = tok >> 40
        if epoch >= 2 and epoch in ready and op['tb'] > ready[epoch]:
            l.set(op['a'], 'tok', str(((epoch - 1) << 40) | (tok & ((1 << 40) - 1))))
            l.save()
            return True
    return False


def main():
    top = tempfile.mkdtemp(prefix='flchaos-checker.')
    base = os.path.join(top, 'base')
    try:
        rc, out = run(['--duration', '12s', '--seed', '20240531', '--no-stress',
                       '--kill-every-ms', '300', '--restart-every-ms', '3000', '--dir', base])
        print(out[-2500:])
        if rc != 0:
            print('FAIL: the unmodified run must pass')
            return 1
        for name, expect, fn in [
            ('duplicate token', 'I1 duplicate-token', dup_token),
            ('token order', 'I1 token-order', token_order),
            ('token below the floor', 'I1 below-floor', below_floor),
            ('lease exclusion', 'lease exclusion', long_deadline),
            ('rejected commit accepted', 'I2 fenced commit', rejected_accepted),
            ('rejected value read', 'I2 rejected commit visible', rejected_read),
            ('stale read', 'I3 stale read', stale_read),
            ('torn read', 'I3 torn-read', torn_read),
            ('lost commit', 'lost commit', lost_commit),
            ('death not reported', 'I5 death not reported|I5 death not detected', death_unreported),
            ('flag after clean release', 'I5 flags', flag_after_release),
            ('waiter on a free lock', 'I6 waiter asleep on a free lock', free_wait),
            ('waiter count leaked', 'I6 waiter count', waiters_leak),
            ('busy wait', 'I7 busy waiting', busy_wait),
            ('other-key commit accepted', 'I8 one scope', xkey_accepted),
            ('timeout overrun', 'I4 acquire overran its timeout', timeout_overrun),
            ('early timeout', 'acquire timed out early', early_timeout),
            ('live holder lost its lease', 'I4 lease taken from a live holder', stale_release),
            ('renew after the deadline', 'lease semantics', renew_after_deadline),
            ('release stale with no taker', 'lease semantics', release_stale_alone),
            ('lock held at the end', 'I4 lock held at the end', held_at_end),
            ('crashed worker', 'worker-crashed', crashed_worker),
        ]:
            mutation(base, name, expect, fn)
    finally:
        if FAILED and os.environ.get('FL_CHAOS_KEEP'):
            print('checker_test: base run kept in %s' % base)
        else:
            shutil.rmtree(top, ignore_errors=True)
    if FAILED:
        print('checker_test: %d forgeries not detected: %s' % (len(FAILED), ', '.join(FAILED)))
        return 1
    print('checker_test: every forged violation was detected')
    return 0


if __name__ == '__main__':
    sys.exit(main())

package fencelock

/*
#include <errno.h>
#include <stdint.h>
#include <fencelock.h>
#include "flgo.h"

// The hot calls.  The region and cancel handles come as uintptr_t: cgo
// checks an argument that points to a structure it cannot see into (these
// opaque ones) for Go pointers by boxing it in an interface, an allocation
// per call.  The key comes as the Go string itself (flgo_name).
static int flgo_acquire(uintptr_t r, _GoString_ key, const fl_key *kh, uint64_t lease_ns,
                        int64_t timeout_ns, uintptr_t cancel, fl_lease *out)
{
    fl_region *reg = (fl_region *)r;
    fl_cancel *w = (fl_cancel *)cancel;
    if (kh)
        return w ? fl_acquire_key_cancelable(reg, kh, lease_ns, timeout_ns, w, out)
                 : fl_acquire_key(reg, kh, lease_ns, timeout_ns, out);
    char k[FL_KEY_MAX + 2];
    flgo_name(k, key);
    return w ? fl_acquire_cancelable(reg, k, lease_ns, timeout_ns, w, out)
             : fl_acquire(reg, k, lease_ns, timeout_ns, out);
}

static int flgo_release(uintptr_t r, fl_lease *lease)
{
    return fl_release((fl_region *)r, lease);
}
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Lease is one acquisition of a key.  Token, Key and the two flags never
// change; Deadline() follows Renew and a running keepalive.
type Lease struct {
	Token uint64 // fencing token: greater than every earlier one of Key
	Key   string // the key acquired
	// ExpiredPrevious: the previous holder's lease ran out while held (it
	// may still be running and write with its old token).
	ExpiredPrevious bool
	// OwnerDiedPrevious: the previous holder died holding the lock and
	// fencelockd freed it.
	OwnerDiedPrevious bool

	r      *Region
	length time.Duration // the lease length last asked for (KeepAlive renews by it)
	mu     sync.Mutex    // serialises Renew, Release, Deadline and keepalive start/stop
	c      C.fl_lease    // token, slot and region are immutable; deadline_ns is written under mu
	ka     *keepalive    // running keepalive, under mu
}

// Deadline is when the lease ends unless renewed: set by Acquire and Renew
// and, while a keepalive runs, its latest renewal (fl_keepalive_status), so
// it stays current as KeepAlive renews.  The time.Time carries a monotonic
// reading (see the Deadline conversion in fencelock.go), so time.Until of
// it is the lease left.  Safe from any goroutine.  (Deadline was a field
// before issue 26; it is a method so that it can follow the keepalive.)
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	ns := l.c.deadline_ns
	if l.ka != nil {
		// l.ka is stopped, and ka.k freed, only under l.mu.
		var kept C.fl_lease
		C.fl_keepalive_status(l.ka.k, &kept)
		// The later of the two: a Renew made while the keepalive runs
		// sets l.c until the keepalive's next renewal (equal lengths: the
		// later deadline is the later write).
		if kept.deadline_ns > ns {
			ns = kept.deadline_ns
		}
	}
	return monoToTime(uint64(ns))
}

// issued refuses a Lease that r did not issue: a Lease of another Region
// (another region file, or another Open of the same one) names a lock slot
// of that handle, which in r may be another key's.  The C library refuses
// it too (-EINVAL, by fl_lease.region); this says which Region, and keeps
// a nil or hand-made Lease from reaching C at all.
func (r *Region) issued(op string, l *Lease) *Error {
	if l == nil || l.r == nil {
		return &Error{Errno: syscall.EINVAL, Op: op,
			Message: "the lease was never issued (only Acquire and AcquireKey make a Lease)"}
	}
	if l.r != r {
		return &Error{Errno: syscall.EINVAL, Op: op,
			Message: "the lease belongs to another Region (" + l.r.path +
				"): a Lease is valid only with the Region that acquired it"}
	}
	return nil
}

// handle is Region.handle of the lease's Region (see there), EINVAL for a
// Lease no Acquire made.
func (l *Lease) handle(op string) (*C.fl_region, error) {
	if l.r == nil {
		return nil, (*Region)(nil).issued(op, l)
	}
	return l.r.handle(op)
}

// Acquire takes the lock of key with a lease of the given length, waiting
// while the key is held until ctx is done: a deadline of ctx is the
// timeout, and cancelling ctx ends the wait at once (the C library's
// fl_acquire_cancelable, woken by fl_cancel_trigger).  With a ctx that is
// never done (context.Background()) it waits without limit, or until the
// Region is closed (ErrClosed).  A ctx already done makes one try.  When
// it ends without the lock the error matches ErrBusy, and ctx.Err() if ctx
// ended it; its Errno is ETIMEDOUT or ECANCELED (whichever of the C
// timeout and the cancellation came first), or EBUSY for a single try.
// The lease starts with the acquisition.
//
// A wait is one cgo call, so a waiting goroutine holds an OS thread for as
// long as it waits (the runtime starts other threads for the other
// goroutines; a thousand waiters are a thousand threads).  A ctx that can
// be done adds a goroutine per wait, which triggers the cancellation.
func (r *Region) Acquire(ctx context.Context, key string, lease time.Duration) (*Lease, error) {
	if e := checkName("acquire", "key", key); e != nil {
		return nil, e
	}
	return r.acquire(ctx, target{name: key}, lease)
}

// target is what an acquisition names: the key, or a resolved key handle
// (kh, the C library's fl_key).
type target struct {
	name string
	kh   *C.fl_key
}

func (r *Region) acquire(ctx context.Context, k target, lease time.Duration) (*Lease, error) {
	l := &Lease{Key: k.name, r: r, length: lease}
	timeout := int64(C.FL_WAIT_FOREVER)
	var ended error // what ended a wait that ends without the lock
	deadline, hasDeadline := ctx.Deadline()
	if err := ctx.Err(); err != nil {
		timeout, ended = 0, err
	} else if hasDeadline {
		ended = context.DeadlineExceeded
		if timeout = int64(time.Until(deadline)); timeout <= 0 {
			timeout = 0
		}
	}
	c, err := r.handle("acquire")
	if err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	var e *Error
	if timeout == 0 {
		e = acquireOnce(c, k, durationNs(lease), 0, nil, &l.c)
	} else {
		e = r.wait(ctx, c, k, durationNs(lease), C.int64_t(timeout), &l.c)
	}
	if e == nil {
		l.Token = uint64(l.c.token)
		l.ExpiredPrevious = l.c.flags&C.FL_LEASE_EXPIRED != 0
		l.OwnerDiedPrevious = l.c.flags&C.FL_LEASE_OWNER_DIED != 0
		return l, nil
	}
	if e.kind == ErrBusy {
		if err := ctx.Err(); err != nil {
			ended = err
		}
		e.cause = ended
	}
	return nil, e
}

// wait makes one waiting fl_acquire_cancelable call with a cancel of r's
// that Close triggers and, if ctx can be done, a goroutine triggers when it
// is.  It returns ErrClosed for a wait that Close ended, and a cancelled
// wait (ECANCELED) as ErrBusy for Acquire to add ctx.Err() to.
func (r *Region) wait(ctx context.Context, c *C.fl_region, k target, leaseNs C.uint64_t,
	timeout C.int64_t, out *C.fl_lease) *Error {
	w, e := r.takeCancel()
	if e != nil {
		return e
	}
	var finished, watched chan struct{}
	if done := ctx.Done(); done != nil {
		finished, watched = make(chan struct{}), make(chan struct{})
		go watchCtx(w, done, finished, watched)
	}
	e = acquireOnce(c, k, leaseNs, timeout, w, out)
	if finished != nil {
		close(finished)
		<-watched // no trigger runs after this: w may be reused or freed
	}
	closing := r.putCancel(w, finished != nil)
	if e != nil && e.Errno == syscall.ECANCELED {
		if ctx.Err() == nil && closing {
			return closedError("acquire")
		}
		e.kind = ErrBusy
	}
	return e
}

// watchCtx triggers w when done is closed before finished, then closes
// watched.  (A function, not a closure: w stays off the heap.)
func watchCtx(w *C.fl_cancel, done <-chan struct{}, finished, watched chan struct{}) {
	defer close(watched)
	select {
	case <-done:
		C.fl_cancel_trigger(w)
	case <-finished:
	}
}

// takeCancel gives an untriggered fl_cancel for one wait, or ErrClosed
// once Close has begun (Close triggers only the cancels it finds).
func (r *Region) takeCancel() (*C.fl_cancel, *Error) {
	if w := r.spare.Swap(nil); w != nil {
		// Looked at after the swap: Close sets closing before it triggers
		// the cancels, and one given back after that (putCancel saw
		// closing unset, then reset Close's trigger) is seen here.
		if r.closing.Load() {
			return nil, closedError("acquire")
		}
		return w, nil
	}
	r.cancelMu.Lock()
	defer r.cancelMu.Unlock()
	if r.closing.Load() {
		return nil, closedError("acquire")
	}
	if n := len(r.idle); n > 0 {
		w := r.idle[n-1]
		r.idle = r.idle[:n-1]
		return w, nil
	}
	var w *C.fl_cancel
	if e := call("acquire", func() C.int { return C.fl_cancel_new(&w) }); e != nil {
		return nil, e
	}
	r.cancels = append(r.cancels, w)
	return w, nil
}

// putCancel gives w back for the next wait, reset if a ctx goroutine
// (watched: there was one, and it has ended) triggered it, and reports
// whether Close has begun: then Close may have triggered w, and frees it.
// (Close frees the cancels only once it holds r.mu, which the waits
// read-hold from before takeCancel to after putCancel.)
func (r *Region) putCancel(w *C.fl_cancel, watched bool) (closing bool) {
	if r.closing.Load() {
		return true
	}
	if watched && C.fl_cancel_is_triggered(w) != 0 {
		C.fl_cancel_reset(w)
	}
	if r.spare.CompareAndSwap(nil, w) {
		return false
	}
	r.cancelMu.Lock()
	defer r.cancelMu.Unlock()
	if r.closing.Load() {
		return true
	}
	r.idle = append(r.idle, w)
	return false
}

// Renew extends the lease to now + length (Deadline).  A lease that was
// taken over (or expired) gives a *StaleError: ownership lost.
func (l *Lease) Renew(length time.Duration) error {
	c, err := l.handle("renew")
	if err != nil {
		return err
	}
	defer l.r.mu.RUnlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := call("renew", func() C.int { return C.fl_renew(c, &l.c, durationNs(length)) }); e != nil {
		return stale(e, l, "", 0)
	}
	l.length = length
	return nil
}

// Release ends the lease and wakes the key's waiters; a running keepalive of
// the lease is stopped first.  A lease another acquisition has taken (or one
// released before) gives a *StaleError.
func (l *Lease) Release() error {
	l.mu.Lock()
	ka := l.ka
	l.mu.Unlock()
	if ka != nil {
		ka.stop()
	}
	c, err := l.handle("release")
	if err != nil {
		return err
	}
	defer l.r.mu.RUnlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	return stale(call("release", func() C.int { return C.flgo_release(handleArg(c), &l.c) }), l, "", 0)
}

// Check reports whether the lease is still the current, unexpired holding
// of its key: one atomic read, to let a long job stop early.  Never a
// substitute for the fenced check at the resource (Commit).
func (l *Lease) Check() bool {
	c, err := l.handle("check")
	if err != nil {
		return false
	}
	defer l.r.mu.RUnlock()
	// No lock: fl_check reads token and slot, which never change.
	return C.fl_check(c, &l.c) == 0
}

// acquireOnce makes one fl_acquire call, or fl_acquire_cancelable when w
// is not nil.  The C library answers a wait with EDEADLK when the calling
// OS thread made the key's current acquisition through this handle: a C
// thread that would wait for itself.  Goroutines are not OS threads: the
// goroutine that holds the key may have acquired it on the thread this one
// runs on now.  So on EDEADLK the call is made again from another goroutine
// while this one keeps its thread locked, which puts the second call on
// another thread: the wait then waits, as a goroutine waiting for another
// goroutine should (Go has no deadlock detection here; a goroutine that
// waits for a key it holds itself waits until ctx is done, the Region is
// closed, or its own lease ends).
func acquireOnce(c *C.fl_region, k target, leaseNs C.uint64_t, timeout C.int64_t, w *C.fl_cancel,
	out *C.fl_lease) *Error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rc := cAcquire(c, k, leaseNs, timeout, w, out)
	if rc == -C.EDEADLK {
		// The retry itself meets EDEADLK if meanwhile the key changed
		// hands to a goroutine that ran on the retry's thread; it then
		// retries again, on yet another thread (each level keeps its own
		// locked), so EDEADLK never reaches the caller.
		result := make(chan *Error, 1)
		go func() { result <- acquireOnce(c, k, leaseNs, timeout, w, out) }()
		return <-result
	}
	if rc >= 0 {
		return nil
	}
	return newError("acquire", syscall.Errno(-rc), C.GoString(C.fl_last_error()))
}

// cAcquire is a plain function, not a closure, so that the uncontended
// path allocates nothing for it.
func cAcquire(c *C.fl_region, k target, leaseNs C.uint64_t, timeout C.int64_t, w *C.fl_cancel,
	out *C.fl_lease) C.int {
	return C.flgo_acquire(handleArg(c), k.name, k.kh, leaseNs, timeout,
		C.uintptr_t(uintptr(unsafe.Pointer(w))), out)
}

// Key is a key looked up once (Region.Key, the C library's
// fl_key_resolve): AcquireKey takes its lock without checking, hashing
// and looking the name up again.  It is the same lock as Acquire's of
// Name: the same tokens (acquisitions by Key and by name interleave, and
// their tokens keep increasing), the same waits and leases.  A Key is a
// value for any goroutine, valid with the Region that resolved it only,
// until that Region is closed.
type Key struct {
	Name string // the key
	r    *Region
	c    C.fl_key
}

// Key resolves name, creating it on first use as Acquire would (nothing is
// acquired, no token consumed).  Errors: EINVAL for a bad name, ENOSPC when
// the key is new and the region's lock table is full.
func (r *Region) Key(name string) (*Key, error) {
	k, cerr := cString("resolve", "key", name)
	if cerr != nil {
		return nil, cerr
	}
	c, err := r.handle("resolve")
	if err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	kh := &Key{Name: name, r: r}
	if e := call("resolve", func() C.int { return C.fl_key_resolve(c, cptr(k), &kh.c) }); e != nil {
		return nil, e
	}
	return kh, nil
}

// AcquireKey is Acquire of k's key (see Acquire for ctx, lease and the
// errors).  A Key another Region resolved gives EINVAL.
func (r *Region) AcquireKey(ctx context.Context, k *Key, lease time.Duration) (*Lease, error) {
	if k == nil || k.r != r {
		return nil, &Error{Errno: syscall.EINVAL, Op: "acquire",
			Message: "key handle was resolved by another Region (a Key is valid only with the Region that resolved it)"}
	}
	return r.acquire(ctx, target{name: k.Name, kh: &k.c}, lease)
}

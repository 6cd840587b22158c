package fencelock

/*
#include <errno.h>
#include <fencelock.h>
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Lease is one acquisition of a key.  Token, Key and the two flags never
// change; Deadline is updated by Renew and when a keepalive stops.  Read
// Deadline only from the goroutine that renews (or after stop returned).
type Lease struct {
	Token    uint64    // fencing token: greater than every earlier one of Key
	Key      string    // the key acquired
	Deadline time.Time // when the lease ends unless renewed (monotonic reading: see Deadline conversion)
	// ExpiredPrevious: the previous holder's lease ran out while held (it
	// may still be running and write with its old token).
	ExpiredPrevious bool
	// OwnerDiedPrevious: the previous holder died holding the lock and
	// fencelockd freed it.
	OwnerDiedPrevious bool

	r      *Region
	length time.Duration // the lease length last asked for (KeepAlive renews by it)
	mu     sync.Mutex    // serialises Renew, Release and keepalive start/stop
	c      C.fl_lease    // token and slot are immutable; deadline_ns is written under mu
	ka     *keepalive    // running keepalive, under mu
}

// acquireSlice bounds one C wait so that a cancelled context ends Acquire
// promptly, and a Close is not held up by a wait (Acquire then returns
// ErrClosed).  TODO(C cancellation API): when libfencelock can cancel a wait,
// replace the slices with one fl_acquire that ctx.Done() cancels.  Until
// then each slice that times out counts in the key's timeout counter
// (LockInfo.Timeouts), and a waiting goroutine occupies an OS thread.
const acquireSlice = 50 * time.Millisecond

// Acquire takes the lock of key with a lease of the given length and waits
// while the key is held, until ctx is done: a deadline of ctx is the
// timeout, and a cancelled ctx ends the wait within about 50 ms.  With a ctx
// that is never done (context.Background()) it waits without limit (or
// until the Region is closed: ErrClosed).  A ctx
// already done makes one try.  When it ends without the lock the error
// matches ErrBusy (and ctx.Err() if ctx ended it; its Errno is ETIMEDOUT,
// or EBUSY for a single try).  The lease starts with the acquisition.
func (r *Region) Acquire(ctx context.Context, key string, lease time.Duration) (*Lease, error) {
	k, cerr := cString("acquire", "key", key)
	if cerr != nil {
		return nil, cerr
	}
	l := &Lease{Key: key, r: r, length: lease}
	done := ctx.Done()
	deadline, hasDeadline := ctx.Deadline()
	for {
		// Sliced even when ctx can never be done, so that Close (which
		// waits for the region's calls) is not held up by a wait.
		timeout := int64(acquireSlice)
		var ended error // set when this is the last attempt
		if done != nil {
			if err := ctx.Err(); err != nil {
				timeout, ended = 0, err
			} else if hasDeadline {
				if left := time.Until(deadline); left <= 0 {
					timeout, ended = 0, context.DeadlineExceeded
				} else if left <= acquireSlice {
					timeout, ended = int64(left), context.DeadlineExceeded
				}
			}
		}
		c, err := r.handle("acquire")
		if err != nil {
			return nil, err
		}
		e := acquireOnce(c, k, durationNs(lease), C.int64_t(timeout), &l.c)
		r.mu.RUnlock()
		if e == nil {
			l.Token = uint64(l.c.token)
			l.Deadline = monoToTime(uint64(l.c.deadline_ns))
			l.ExpiredPrevious = l.c.flags&C.FL_LEASE_EXPIRED != 0
			l.OwnerDiedPrevious = l.c.flags&C.FL_LEASE_OWNER_DIED != 0
			return l, nil
		}
		if e.Errno != syscall.ETIMEDOUT && e.Errno != syscall.EBUSY {
			return nil, e
		}
		if ended == nil {
			ended = ctx.Err()
		}
		if ended != nil {
			e.cause = ended
			return nil, e
		}
	}
}

// Renew extends the lease to now + length and updates Deadline.  A lease
// that was taken over (or expired) gives a *StaleError: ownership lost.
func (l *Lease) Renew(length time.Duration) error {
	c, err := l.r.handle("renew")
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
	l.Deadline = monoToTime(uint64(l.c.deadline_ns))
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
	c, err := l.r.handle("release")
	if err != nil {
		return err
	}
	defer l.r.mu.RUnlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	return stale(call("release", func() C.int { return C.fl_release(c, &l.c) }), l, "", 0)
}

// Check reports whether the lease is still the current, unexpired holding
// of its key: one atomic read, to let a long job stop early.  Never a
// substitute for the fenced check at the resource (Commit).
func (l *Lease) Check() bool {
	c, err := l.r.handle("check")
	if err != nil {
		return false
	}
	defer l.r.mu.RUnlock()
	// No lock: fl_check reads token and slot, which never change.
	return C.fl_check(c, &l.c) == 0
}

// acquireOnce makes one fl_acquire call.  The C library answers a wait with
// EDEADLK when the calling OS thread made the key's current acquisition
// through this handle: a C thread that would wait for itself.  Goroutines
// are not OS threads: the goroutine that holds the key may have acquired it
// on the thread this one runs on now.  So on EDEADLK the call is made again
// from another goroutine while this one keeps its thread locked, which puts
// the second call on another thread: the wait then waits, as a goroutine
// waiting for another goroutine should (Go has no deadlock detection here;
// a goroutine that waits for a key it holds itself waits until ctx is done
// or its own lease ends).
func acquireOnce(c *C.fl_region, k []byte, leaseNs C.uint64_t, timeout C.int64_t, out *C.fl_lease) *Error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rc := C.fl_acquire(c, cptr(k), leaseNs, timeout, out)
	if rc == -C.EDEADLK {
		result := make(chan *Error, 1)
		go func() {
			result <- call("acquire", func() C.int {
				return C.fl_acquire(c, cptr(k), leaseNs, timeout, out)
			})
		}()
		return <-result
	}
	if rc >= 0 {
		return nil
	}
	return newError("acquire", syscall.Errno(-rc), C.GoString(C.fl_last_error()))
}

package fencelock

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A cancelled ctx ends a long wait at once, in one C call: the key's
// timeout counter stays 0 (the former 50 ms slices each counted there).
func TestCancelEndsLongWait(t *testing.T) { /* I6 */
	d := startDaemon(t)
	holder, r := d.open(t), d.open(t)
	mustAcquire(t, holder, "k", time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	result := make(chan error, 1)
	go func() {
		_, err := r.Acquire(ctx, "k", time.Second)
		result <- err
	}()
	waitForWaiters(t, r, "k", 1)
	time.Sleep(300 * time.Millisecond) // six of the former slices
	cancelled := time.Now()
	cancel()
	select {
	case err := <-result:
		if took := time.Since(cancelled); took > 2*time.Second {
			t.Fatalf("the wait ended %v after the cancel", took)
		}
		var e *Error
		if !errors.Is(err, ErrBusy) || !errors.Is(err, context.Canceled) || !errors.As(err, &e) ||
			e.Errno != syscall.ECANCELED {
			t.Fatalf("cancelled wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled wait did not end")
	}
	li := lockInfo(t, r, "k")
	if li.Timeouts != 0 || li.Waiters != 0 || li.Acquisitions != 1 {
		t.Fatalf("after the cancelled wait: %+v", li)
	}
	// The cancel is reset for the next wait: a try and a short wait.
	if _, err := r.Acquire(context.Background(), "free", time.Second); err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer tcancel()
	if _, err := r.Acquire(tctx, "k", time.Second); !errors.Is(err, context.DeadlineExceeded) ||
		!errors.Is(err, ErrBusy) {
		t.Fatalf("wait with a deadline after a cancelled one: %v", err)
	}
}

// Close ends waits on the Region, whatever their ctx, with ErrClosed.
func TestCloseEndsCancelableWaits(t *testing.T) {
	d := startDaemon(t)
	holder := d.open(t)
	mustAcquire(t, holder, "k", time.Minute)
	r, err := Open(d.region)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tctx, tcancel := context.WithTimeout(context.Background(), time.Hour)
	defer tcancel()
	result := make(chan error, 3)
	for _, c := range []context.Context{context.Background(), ctx, tctx} {
		c := c
		go func() {
			_, err := r.Acquire(c, "k", time.Second)
			result <- err
		}()
	}
	waitForWaiters(t, holder, "k", 3)
	closed := time.Now()
	r.Close()
	for i := 0; i < 3; i++ {
		select {
		case err := <-result:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("wait on a closed region: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end the waits")
		}
	}
	if took := time.Since(closed); took > 2*time.Second {
		t.Fatalf("the waits ended %v after Close", took)
	}
	if _, err := r.Acquire(ctx, "k", time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close: %v", err)
	}
}

// The EDEADLK retry: a goroutine whose OS thread made the key's current
// acquisition (C would answer EDEADLK) still waits, here for another
// goroutine's release.
func TestWaitOnOwnThreadsKey(t *testing.T) {
	r := startDaemon(t).open(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l := mustAcquire(t, r, "k", time.Minute) // on this thread
	tctx, tcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer tcancel()
	if _, err := r.Acquire(tctx, "k", time.Second); !errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.EDEADLK) {
		t.Fatalf("wait with a deadline on this thread's key: %v", err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		l.Release()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l2, err := r.Acquire(ctx, "k", time.Second)
	if err != nil || l2.Token <= l.Token {
		t.Fatalf("after the release by another goroutine: %+v %v", l2, err)
	}
}

func lockInfo(t *testing.T, r *Region, key string) LockInfo {
	t.Helper()
	locks, err := r.Locks()
	if err != nil {
		t.Fatal(err)
	}
	for _, li := range locks {
		if li.Key == key {
			return li
		}
	}
	t.Fatalf("no lock %q", key)
	return LockInfo{}
}

// waitForWaiters polls until n waits sleep on key (LockInfo.Waiters counts
// each sleeping wait, goroutines of one process too).
func waitForWaiters(t *testing.T, r *Region, key string, n uint32) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); lockInfo(t, r, key).Waiters < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters on %q did not begin to wait", n, key)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Close while goroutines acquire and release in a loop, two of them on one
// key (so some calls wait): every loop ends with ErrClosed, none hangs,
// whichever of the Region's cancels (the spare, the idle list) its waits
// held when Close came.
func TestCloseUnderLoad(t *testing.T) {
	d := startDaemon(t)
	r, err := Open(d.region)
	if err != nil {
		t.Fatal(err)
	}
	const loops = 4
	warm := make(chan struct{}, loops)
	ended := make(chan error, loops)
	for i := 0; i < loops; i++ {
		key := fmt.Sprintf("k%d", i/2)
		go func() {
			for n := 0; ; n++ {
				if n == 100 {
					warm <- struct{}{}
				}
				l, err := r.Acquire(context.Background(), key, time.Minute)
				if err == nil {
					err = l.Release()
				}
				if err != nil {
					ended <- err
					return
				}
			}
		}()
	}
	for i := 0; i < loops; i++ {
		select {
		case <-warm:
		case err := <-ended:
			t.Fatalf("a loop ended before Close: %v", err)
		}
	}
	r.Close()
	for i := 0; i < loops; i++ {
		select {
		case err := <-ended:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("a loop ended with %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a loop did not end after Close")
		}
	}
}

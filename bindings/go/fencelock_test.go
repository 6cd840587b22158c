package fencelock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestAcquireCommitRead(t *testing.T) { /* I1 I2 I3 */
	d := startDaemon(t)
	r := d.open(t)
	if !r.Registered() || r.Path() != d.region || r.Backend() != "shm" {
		t.Fatalf("registered %v, path %q", r.Registered(), r.Path())
	}
	a := mustAcquire(t, r, "k", time.Second)
	acc, err := r.Commit(a, "rec", []byte("one"), true)
	if err != nil || acc != a.Token {
		t.Fatalf("commit: %d %v", acc, err)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	b := mustAcquire(t, r, "k", time.Second)
	if b.Token <= a.Token || b.ExpiredPrevious || b.OwnerDiedPrevious {
		t.Fatalf("second lease %+v after token %d", b, a.Token)
	}
	// Grow on ENOBUFS: longer than the first read buffer (256 bytes).
	big := bytes.Repeat([]byte("x"), 900)
	if _, err := r.Commit(b, "rec", big, true); err != nil {
		t.Fatal(err)
	}
	data, fence, err := r.Read("rec")
	if err != nil || !bytes.Equal(data, big) || fence != b.Token {
		t.Fatalf("read: %d bytes fence %d err %v", len(data), fence, err)
	}
	// Empty values are values.
	if _, err := r.Commit(b, "empty", nil, false); err != nil {
		t.Fatal(err)
	}
	if data, _, err := r.Read("empty"); err != nil || len(data) != 0 {
		t.Fatalf("read empty: %q %v", data, err)
	}
	if _, err := r.CommitU64(b, "ptr", 52, false); err != nil {
		t.Fatal(err)
	}
	if v, f, err := r.ReadU64("ptr"); err != nil || v != 52 || f != b.Token {
		t.Fatalf("read u64: %d %d %v", v, f, err)
	}
	if _, _, err := r.ReadU64("rec"); !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("read u64 of a 900-byte record: %v", err)
	}
	b.Release()
}

// Every sentinel, and the errno and message of the rest.
func TestErrors(t *testing.T) { /* I2 I8 I9 */
	d := startDaemon(t)
	r := d.open(t)
	other := d.open(t)

	// ErrBusy: a try of a held key (ctx already done), and a timed wait.
	held := mustAcquire(t, r, "held", 10*time.Second)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := other.Acquire(done, "held", time.Second)
	var fe *Error
	if !errors.Is(err, ErrBusy) || !errors.Is(err, syscall.EBUSY) || !errors.Is(err, context.Canceled) ||
		!errors.As(err, &fe) || fe.Op != "acquire" {
		t.Fatalf("try of a held key: %v", err)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	_, err = other.Acquire(ctx, "held", time.Second)
	// The C timeout and the ctx's cancel race to end the wait: the errno is
	// ETIMEDOUT or ECANCELED, whichever came first (documented); what is
	// promised is ErrBusy and the ctx's error.
	if !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) ||
		!(errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, syscall.ECANCELED)) {
		t.Fatalf("timed wait on a held key: %v", err)
	}

	// ErrStale / ErrOwnershipLost: commit, renew, release.
	short := mustAcquire(t, r, "short", 20*time.Millisecond)
	next, err := other.Acquire(context.Background(), "short", 10*time.Second) // takes it over at expiry
	if err != nil || !next.ExpiredPrevious {
		t.Fatalf("takeover: %v", err)
	}
	if _, err := other.Commit(next, "short-rec", []byte("new"), false); err != nil {
		t.Fatal(err)
	}
	acc, err := r.Commit(short, "short-rec", []byte("old"), false)
	var se *StaleError
	if !errors.Is(err, ErrStale) || !errors.Is(err, ErrOwnershipLost) || !errors.Is(err, syscall.ESTALE) ||
		!errors.As(err, &se) || se.Accepted != next.Token || se.Token != short.Token || acc != next.Token ||
		se.Record != "short-rec" {
		t.Fatalf("stale commit: %v (accepted %d)", err, acc)
	}
	// Strict: an equal token is refused too.
	if _, err := other.Commit(next, "short-rec", []byte("again"), true); !errors.Is(err, ErrStale) {
		t.Fatalf("strict commit of an equal token: %v", err)
	}
	if err := short.Renew(time.Second); !errors.Is(err, ErrOwnershipLost) || !errors.As(err, &se) ||
		se.Op != "renew" {
		t.Fatalf("stale renew: %v", err)
	}
	if err := short.Release(); !errors.Is(err, ErrOwnershipLost) || !errors.Is(err, ErrStale) {
		t.Fatalf("stale release: %v", err)
	}
	if short.Check() || !next.Check() {
		t.Fatal("check: the old lease is current, or the new one is not")
	}
	if err := next.Release(); err != nil {
		t.Fatal(err)
	}
	if err := next.Release(); !errors.Is(err, ErrOwnershipLost) {
		t.Fatalf("second release: %v", err)
	}

	// ErrScope: "short-rec" is fenced by key "short", never by "held" (I8).
	if _, err := r.Commit(held, "short-rec", []byte("x"), false); !errors.Is(err, ErrScope) ||
		!errors.Is(err, syscall.EXDEV) {
		t.Fatalf("commit across keys: %v", err)
	}

	// ErrNotFound.
	if _, _, err := r.Read("never"); !errors.Is(err, ErrNotFound) || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("read of a record never committed: %v", err)
	}
	if _, _, err := r.ReadU64("never"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read u64 of a record never committed: %v", err)
	}

	// *Error with the errno and fl_last_error()'s message.
	for _, c := range []struct {
		name  string
		err   error
		errno syscall.Errno
	}{
		{"empty key", func() error { _, err := r.Acquire(context.Background(), "", time.Second); return err }(), syscall.EINVAL},
		{"long key", func() error {
			_, err := r.Acquire(context.Background(), strings.Repeat("k", 128), time.Second)
			return err
		}(), syscall.EINVAL},
		{"NUL in key", func() error { _, err := r.Acquire(context.Background(), "a\x00b", time.Second); return err }(), syscall.EINVAL},
		{"zero lease", func() error { _, err := r.Acquire(context.Background(), "z", 0); return err }(), syscall.EINVAL},
		{"record too big", func() error { _, err := r.Commit(held, "big", make([]byte, 1<<20), false); return err }(), syscall.EMSGSIZE},
		{"missing region", func() error { _, err := Open(d.region + ".missing"); return err }(), syscall.ENOENT},
	} {
		if !errors.As(c.err, &fe) || fe.Errno != c.errno || !errors.Is(c.err, c.errno) || fe.Message == "" {
			t.Errorf("%s: %#v, want errno %v with a message", c.name, c.err, c.errno)
		}
		if errors.Is(c.err, ErrBusy) || errors.Is(c.err, ErrStale) || errors.Is(c.err, ErrNotFound) {
			t.Errorf("%s: matches a sentinel: %v", c.name, c.err)
		}
	}
	if _, err := Open(d.region + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing region: %v is not os.ErrNotExist", err)
	}

	// ErrClosed: the region, and a lease of it.
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	l := mustAcquire(t, other, "after-close", time.Second)
	other.Close()
	other.Close()
	if _, err := other.Acquire(context.Background(), "k", time.Second); !errors.Is(err, ErrClosed) ||
		!errors.Is(err, syscall.EBADF) {
		t.Fatalf("acquire on a closed region: %v", err)
	}
	if err := l.Renew(time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("renew of a closed region's lease: %v", err)
	}
	if _, _, err := other.Read("x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("read on a closed region: %v", err)
	}
	// Closing released it as a death: the next holder is told (I5).
	l2 := mustAcquire(t, r, "after-close", time.Second)
	if !l2.OwnerDiedPrevious {
		t.Fatalf("after Close with the lock held: %+v", l2)
	}
}

// A cancelled context ends a wait promptly; a deadline is the timeout.
func TestAcquireContext(t *testing.T) { /* I6 */
	d := startDaemon(t)
	r := d.open(t)
	held := mustAcquire(t, r, "k", time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		_, err := r.Acquire(ctx, "k", time.Second)
		result <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it wait (not for ordering: any moment works)
	cancelled := time.Now()
	cancel()
	select {
	case err := <-result:
		if !errors.Is(err, ErrBusy) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v", err)
		}
		if took := time.Since(cancelled); took > time.Second {
			t.Fatalf("the wait ended %v after the cancel", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled wait did not end")
	}

	start := time.Now()
	tctx, tcancel := context.WithTimeout(context.Background(), 120*time.Millisecond)
	defer tcancel()
	_, err := r.Acquire(tctx, "k", time.Second)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took < 120*time.Millisecond || took > 3*time.Second {
		t.Fatalf("wait with a deadline: %v after %v", err, took)
	}

	// A waiter is woken by the release.
	got := make(chan *Lease, 1)
	go func() {
		l, err := r.Acquire(context.Background(), "k", time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(20 * time.Millisecond)
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l == nil || l.Token <= held.Token {
			t.Fatalf("waiter got %+v", l)
		}
		l.Release()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
}

// Goroutines sharing one Region: mutual exclusion through the lock, tokens
// strictly increasing, and every increment kept by the fenced record.
func TestConcurrentGoroutines(t *testing.T) { /* I1 I2 */
	d := startDaemon(t)
	r := d.open(t)
	const workers, rounds = 8, 50
	var mu sync.Mutex
	var tokens []uint64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				l, err := r.Acquire(context.Background(), "counter", 10*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				v, _, err := r.ReadU64("counter")
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Error(err)
				}
				if _, err := r.CommitU64(l, "counter", v+1, true); err != nil {
					t.Error(err)
				}
				mu.Lock()
				tokens = append(tokens, l.Token) // in the order the holdings happened
				mu.Unlock()
				if err := l.Release(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	v, fence, err := r.ReadU64("counter")
	if err != nil || v != workers*rounds {
		t.Fatalf("counter %d (%v), want %d", v, err, workers*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d after %d", tokens[i], tokens[i-1])
		}
	}
	if fence != tokens[len(tokens)-1] {
		t.Fatalf("fence %d, last token %d", fence, tokens[len(tokens)-1])
	}
}

// Deadline is on Go's monotonic clock: time.Until gives the lease left.
func TestDeadline(t *testing.T) { /* I11 */
	d := startDaemon(t)
	r := d.open(t)
	before := time.Now()
	l := mustAcquire(t, r, "k", 2*time.Second)
	after := time.Now()
	if l.Deadline().Before(before.Add(2*time.Second-time.Millisecond)) ||
		l.Deadline().After(after.Add(2*time.Second+time.Millisecond)) {
		t.Fatalf("deadline %v not within [%v, %v] + 2 s", l.Deadline(), before, after)
	}
	if err := l.Renew(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(l.Deadline()); left < 4*time.Second || left > 5*time.Second+time.Millisecond {
		t.Fatalf("after renew, %v left", left)
	}
	l.Release()
}

// A keepalive keeps a short lease past several of its lengths; stop gives
// the latest deadline; Release stops a running one; Close stops the rest.
func TestKeepAlive(t *testing.T) {
	d := startDaemon(t)
	r := d.open(t)
	l := mustAcquire(t, r, "k", 60*time.Millisecond)
	lost := make(chan struct{}, 1)
	stop, err := l.KeepAlive(func() { lost <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.KeepAlive(nil); !errors.Is(err, syscall.EALREADY) {
		t.Fatalf("second keepalive: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if !l.Check() {
		t.Fatal("the kept lease expired")
	}
	stop()
	stop()
	if time.Until(l.Deadline()) <= 0 || time.Until(l.Deadline()) > 60*time.Millisecond {
		t.Fatalf("deadline after stop: %v left", time.Until(l.Deadline()))
	}
	select {
	case <-lost:
		t.Fatal("onLost called for a lease that was kept")
	default:
	}
	if _, err := l.KeepAlive(nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2 := mustAcquire(t, r, "k2", 60*time.Millisecond)
	if _, err := l2.KeepAlive(nil); err != nil {
		t.Fatal(err)
	}
	r.Close() // stops the keepalive first
}

func TestInspection(t *testing.T) {
	d := startDaemon(t)
	r := d.open(t)
	l := mustAcquire(t, r, "k", 10*time.Second)
	if _, err := r.Commit(l, "rec", []byte("v"), false); err != nil {
		t.Fatal(err)
	}
	info, err := r.Info()
	if err != nil || info.LockCapacity != 64 || info.LocksUsed != 1 || info.RecordsUsed != 1 ||
		!info.Ready || !info.Served || info.BootID == "" || info.Created.IsZero() || info.Epoch == 0 {
		t.Fatalf("info: %+v %v", info, err)
	}
	locks, err := r.Locks()
	if err != nil || len(locks) != 1 || locks[0].Key != "k" || locks[0].State != LockHeld ||
		locks[0].Token != l.Token || locks[0].HolderPID != uint32(os.Getpid()) || locks[0].LeaseLeft <= 0 {
		t.Fatalf("locks: %+v %v", locks, err)
	}
	recs, err := r.Records()
	if err != nil || len(recs) != 1 || recs[0].Name != "rec" || recs[0].BoundKey != "k" ||
		recs[0].AcceptedToken != l.Token || recs[0].Size != 1 {
		t.Fatalf("records: %+v %v", recs, err)
	}
	clients, err := r.Clients()
	if err != nil || len(clients) != 1 || clients[0].PID != uint32(os.Getpid()) || !clients[0].Attached {
		t.Fatalf("clients: %+v %v", clients, err)
	}
	ro, err := OpenReadOnly(d.region)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if data, _, err := ro.Read("rec"); err != nil || string(data) != "v" || ro.Registered() {
		t.Fatalf("read-only: %q %v", data, err)
	}
	if _, err := ro.Acquire(context.Background(), "k2", time.Second); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("acquire on a read-only handle: %v", err)
	}
	l.Release()
}

func TestDefaultRegionPath(t *testing.T) {
	t.Setenv("FENCELOCK_REGION", "/tmp/somewhere/region")
	if p, err := DefaultRegionPath(); err != nil || p != "/tmp/somewhere/region" {
		t.Fatalf("%q %v", p, err)
	}
	os.Unsetenv("FENCELOCK_REGION")
	// The documented defaults: root's system-wide region, a user's runtime
	// directory, else the /dev/shm fallback.
	want := fmt.Sprintf("/dev/shm/fencelock-%d/region", os.Getuid())
	xdg := os.Getenv("XDG_RUNTIME_DIR")
	if st, err := os.Stat("/run"); os.Getuid() == 0 && err == nil && st.IsDir() {
		want = "/run/fencelock/region"
	} else if st, err := os.Stat(xdg); os.Getuid() != 0 && strings.HasPrefix(xdg, "/") && err == nil && st.IsDir() {
		want = xdg + "/fencelock/region"
	}
	if p, err := DefaultRegionPath(); err != nil || p != want {
		t.Fatalf("%q %v, want %q", p, err, want)
	}
}

// Close of a Region ends a wait on it (with ErrClosed) instead of waiting
// for it.
func TestCloseEndsWait(t *testing.T) {
	d := startDaemon(t)
	holder := d.open(t)
	l := mustAcquire(t, holder, "k", time.Minute)
	r, err := Open(d.region)
	if err != nil {
		t.Fatal(err)
	}
	result := make(chan error, 1)
	go func() {
		_, err := r.Acquire(context.Background(), "k", time.Second)
		result <- err
	}()
	time.Sleep(20 * time.Millisecond)
	r.Close()
	select {
	case err := <-result:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("wait on a closed region: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the wait")
	}
	l.Release()
}

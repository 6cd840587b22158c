package fencelock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The binding under misuse (issue 26): what a new user gets wrong must be
// refused or cleaned up, never accepted or leaked.

// A Lease is valid only with the Region that acquired it: a Commit through
// another Region (another region file, or another Open of the same file)
// is refused and writes nothing, and a nil or hand-made Lease is refused
// instead of reaching C (issue 26, defect 2).
func TestForeignLease(t *testing.T) { /* I2 */
	da, db := startDaemon(t), startDaemon(t)
	ra, rb := da.open(t), db.open(t)
	ra2 := da.open(t) // the same file as ra, another handle

	// B's real holder of "k" writes B's record.
	lb := mustAcquire(t, rb, "k", time.Minute)
	if _, err := rb.Commit(lb, "rec", []byte("B's holder"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.CommitU64(lb, "ptr", 7, false); err != nil {
		t.Fatal(err)
	}
	// A lease of the same key name in A, with a token greater than the
	// one B's record accepted if the epochs allow (both daemons are new:
	// the second acquisition's is): nothing but the Region decides.
	la := mustAcquire(t, ra, "k", time.Minute)
	if la.Token <= lb.Token {
		la.Release()
		la = mustAcquire(t, ra, "k", time.Minute)
	}
	defer la.Release()
	checkForeign(t, rb, la, lb)
	// Another handle of A's own file refuses it too (the C library also
	// does: fl_lease.region).
	if _, err := ra2.Commit(la, "rec2", []byte("x"), false); !isForeign(err) {
		t.Fatalf("commit of ra's lease through ra2: %v", err)
	}
	if _, _, err := ra2.Read("rec2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ra2's record after the refused commit: %v", err)
	}
	// Through its own Region it is an ordinary lease.
	if _, err := ra.Commit(la, "rec", []byte("A's holder"), false); err != nil {
		t.Fatal(err)
	}

	// nil and hand-made leases: EINVAL, no panic, nothing written.
	forged := &Lease{Token: lb.Token + 1, Key: "k"}
	for name, l := range map[string]*Lease{"nil": nil, "hand-made": forged} {
		if _, err := rb.Commit(l, "rec", []byte("forged"), false); !isNeverIssued(err) {
			t.Errorf("commit of a %s lease: %v", name, err)
		}
		if _, err := rb.CommitU64(l, "ptr", 666, false); !isNeverIssued(err) {
			t.Errorf("commit u64 of a %s lease: %v", name, err)
		}
	}
	if err := forged.Renew(time.Second); !isNeverIssued(err) {
		t.Errorf("renew of a hand-made lease: %v", err)
	}
	if err := forged.Release(); !isNeverIssued(err) {
		t.Errorf("release of a hand-made lease: %v", err)
	}
	if forged.Check() {
		t.Error("a hand-made lease checks as current")
	}
	if _, err := forged.KeepAlive(nil); !isNeverIssued(err) {
		t.Errorf("keepalive of a hand-made lease: %v", err)
	}
	checkUntouched(t, rb, lb)
	if err := lb.Release(); err != nil {
		t.Fatal(err)
	}
}

func checkForeign(t *testing.T, rb *Region, la, lb *Lease) {
	t.Helper()
	if _, err := rb.Commit(la, "rec", []byte("A's holder"), false); !isForeign(err) {
		t.Fatalf("commit of A's lease through B: %v", err)
	}
	if _, err := rb.Commit(la, "rec", []byte("A's holder"), true); !isForeign(err) {
		t.Fatalf("strict commit of A's lease through B: %v", err)
	}
	if _, err := rb.CommitU64(la, "ptr", 666, false); !isForeign(err) {
		t.Fatalf("commit u64 of A's lease through B: %v", err)
	}
	checkUntouched(t, rb, lb)
}

func checkUntouched(t *testing.T, rb *Region, lb *Lease) {
	t.Helper()
	if data, fence, err := rb.Read("rec"); err != nil || string(data) != "B's holder" || fence != lb.Token {
		t.Fatalf("B's record: %q fence %d (%v), want B's holder's, fence %d", data, fence, err, lb.Token)
	}
	if v, fence, err := rb.ReadU64("ptr"); err != nil || v != 7 || fence != lb.Token {
		t.Fatalf("B's u64 record: %d fence %d (%v)", v, fence, err)
	}
}

func isForeign(err error) bool {
	var fe *Error
	return errors.As(err, &fe) && errors.Is(err, syscall.EINVAL) && fe.Op == "commit" &&
		strings.Contains(fe.Message, "belongs to another Region")
}

func isNeverIssued(err error) bool {
	var fe *Error
	return errors.As(err, &fe) && errors.Is(err, syscall.EINVAL) &&
		strings.Contains(fe.Message, "never issued")
}

// A Region dropped without Close is closed by its finalizer: more Regions
// than the supervisor has client entries can be opened and dropped in
// turn, and a lock held by a dropped Region is released as a death
// (issue 26, defect 6).
func TestDroppedRegionIsClosed(t *testing.T) { /* I5 */
	const clients = 2
	d := startDaemon(t, "--clients", "2")
	for i := 0; i < 12*clients; i++ {
		openAndDrop(t, d.region, "")
	}

	// A dropped Region's lock goes to the next holder as its owner's death.
	openAndDrop(t, d.region, "held")
	r := openCollecting(t, d.region) // the dropped Region may hold the other entry
	defer r.Close()
	got := make(chan *Lease, 1)
	go func() {
		l, err := r.Acquire(context.Background(), "held", time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	var l *Lease
	for deadline := time.Now().Add(60 * time.Second); l == nil; {
		select {
		case l = <-got:
			if l == nil {
				t.FailNow()
			}
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the lock of a dropped Region was not released")
			}
			runtime.GC()
		}
	}
	if !l.OwnerDiedPrevious {
		t.Fatalf("after the holder's Region was dropped: %+v", l)
	}
}

// openAndDrop opens region (collecting garbage while the supervisor's
// client table is full), checks it is registered, acquires key if not "",
// and drops it all without Close.
func openAndDrop(t *testing.T, region, key string) {
	t.Helper()
	r := openCollecting(t, region)
	if !r.Registered() {
		t.Fatal("not registered")
	}
	if key != "" {
		mustAcquire(t, r, key, time.Hour)
	}
}

// openCollecting opens region; while Open fails with EUSERS (every client
// entry is taken, by Regions dropped but not yet finalized) it collects
// garbage and tries again, for at most 60 s.
func openCollecting(t *testing.T, region string) *Region {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := Open(region)
		if err == nil {
			return r
		}
		if !errors.Is(err, syscall.EUSERS) || time.Now().After(deadline) {
			t.Fatalf("open with dropped Regions: %v", err)
		}
		runtime.GC() // finalizes the unreachable Regions (their fl_close)
		time.Sleep(5 * time.Millisecond)
	}
}

// Every error names its errno: a call on a closed Region is EBADF, which
// the C library's table does not know (issue 26, defect 10).
func TestErrorText(t *testing.T) {
	r := startDaemon(t).open(t)
	l := mustAcquire(t, r, "k", time.Minute)
	if _, err := l.KeepAlive(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.KeepAlive(nil); err == nil ||
		err.Error() != "fencelock: keepalive: the lease already has a keepalive (EALREADY)" {
		t.Errorf("second keepalive: %v", err)
	}
	r.Close()
	_, err := r.Acquire(context.Background(), "k", time.Second)
	if err == nil || err.Error() != "fencelock: acquire: region is closed (EBADF)" {
		t.Errorf("acquire on a closed Region: %v", err)
	}
	if _, err := r.Commit(l, "rec", nil, false); err == nil ||
		err.Error() != "fencelock: commit: region is closed (EBADF)" {
		t.Errorf("commit on a closed Region: %v", err)
	}
	if err := l.Renew(time.Second); err == nil || err.Error() != "fencelock: renew: region is closed (EBADF)" {
		t.Errorf("renew on a closed Region: %v", err)
	}
	// The C library's errors keep its names; any other errno is named by
	// number, never "E?".
	for _, c := range []struct {
		e    Error
		want string
	}{
		{Error{Errno: syscall.ESTALE, Op: "x"}, "fencelock: x: " +
			"fencing token is stale: ownership lost (do not retry with this token) (ESTALE)"},
		{Error{Errno: syscall.EBADF, Op: "x"}, "fencelock: x: the handle is closed (EBADF)"},
		{Error{Errno: syscall.Errno(200), Op: "x", Message: "m"}, "fencelock: x: m (errno 200)"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%#v: %q, want %q", c.e, got, c.want)
		}
	}
}

// Deadline follows the keepalive's renewals: a short lease kept alive past
// its first deadline has a later one (issue 26, defect 11).
func TestDeadlineFollowsKeepAlive(t *testing.T) {
	r := startDaemon(t).open(t)
	l := mustAcquire(t, r, "k", 300*time.Millisecond)
	first := l.Deadline()
	stop, err := l.KeepAlive(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Readers on other goroutines while the keepalive renews (the race
	// detector checks the reads).
	done := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			select {
			case <-done:
				return
			default:
				l.Deadline()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	time.Sleep(time.Until(first) + 200*time.Millisecond)
	now := time.Now()
	kept := l.Deadline()
	close(done)
	<-read
	if !l.Check() {
		t.Fatal("the kept lease is not current")
	}
	if !kept.After(first) || !kept.After(now) {
		t.Fatalf("Deadline %v while kept alive, %v after the first deadline %v",
			kept, now.Sub(first), first)
	}
	stop()
	if after := l.Deadline(); after.Before(kept) {
		t.Fatalf("Deadline %v after stop, before %v", after, kept)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}

// `go doc` shows every exported constant's value: each is written out as a
// literal, not an expression of C.FL_* (issue 26, defect 12).
func TestGoDocShowsConstantValues(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goTool, "doc", "-all", ".")
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go doc -all: %v\n%s", err, out)
	}
	doc := string(out)
	start, end := strings.Index(doc, "\nCONSTANTS\n"), strings.Index(doc, "\nVARIABLES\n")
	if start < 0 || end < start {
		t.Fatalf("no CONSTANTS section in go doc's output:\n%s", doc)
	}
	consts := doc[start:end]
	spec := regexp.MustCompile(`(?m)^\t([A-Z]\w*)(?: +\w+)? += +(.*)$`)
	literal := regexp.MustCompile(`^(\d+|"[^"]*")( |$)`)
	seen := map[string]bool{}
	for _, m := range spec.FindAllStringSubmatch(consts, -1) {
		seen[m[1]] = true
		if !literal.MatchString(m[2]) {
			t.Errorf("go doc shows %s = %s: not a value", m[1], m[2])
		}
	}
	for _, name := range []string{"KeyMax", "TokenMax", "TokenEpochShift", "RegionEnv", "UnregisteredMax",
		"LockFree", "LockHeld", "LockExpired", "RunNever", "RunStarted", "RunClean",
		"OpCommit", "OpStrictCommit", "OpRenew", "OpRelease"} {
		if !seen[name] {
			t.Errorf("go doc does not show constant %s", name)
		}
	}
	for _, want := range []string{"KeyMax = 127", "TokenMax uint64 = 9223372036854775807",
		"LockExpired int = 2", "OpRelease      uint32 = 4"} {
		if !strings.Contains(consts, want) {
			t.Errorf("go doc lacks %q:\n%s", want, consts)
		}
	}
}

// TestCloseRacesKeepAlive: Close while another goroutine starts, stops and
// releases kept leases.  A KeepAlive that registered after Close had copied
// the running keepalives was freed by fl_close and then stopped (SIGSEGV in
// fl_keepalive_stop; found by issue 26's hostile review).
func TestCloseRacesKeepAlive(t *testing.T) {
	d := startDaemon(t)
	for i := 0; i < 300; i++ {
		r := d.open(t)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				l, err := r.Acquire(context.Background(), "ka", 5*time.Second)
				if err != nil {
					return // closed
				}
				stop, err := l.KeepAlive(nil)
				if err != nil {
					return
				}
				stop()
				l.Release()
			}
		}()
		time.Sleep(time.Duration(i%10) * 50 * time.Microsecond) // vary where Close lands
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		<-done
	}
}

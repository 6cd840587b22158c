package fencelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every FL_API function of include/fencelock.h is called by the binding
// (issue 16: a function added to the header fails this test until it is
// wrapped, or used by a wrapper): from Go (C.fl_xxx) or from a C helper of
// a cgo preamble (the hot calls, lease.go and record.go).
func TestEveryPublicFunction(t *testing.T) {
	header, err := os.ReadFile("../../include/fencelock.h")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	files, _ := os.ReadDir(".")
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".go") && !strings.HasSuffix(f.Name(), "_test.go") {
			b, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	var preambles strings.Builder
	for _, m := range regexp.MustCompile(`(?s)/\*(.*?)\*/\s*import "C"`).FindAllStringSubmatch(src.String(), -1) {
		preambles.WriteString(m[1])
	}
	decl := regexp.MustCompile(`FL_API [^;(]*?\b(fl_[a-z0-9_]+)\s*\(`)
	var missing []string
	n := 0
	for _, m := range decl.FindAllSubmatch(header, -1) {
		n++
		name := string(m[1])
		inC := regexp.MustCompile(`[^\w.]` + name + `\(`).MatchString(preambles.String())
		if !strings.Contains(src.String(), "C."+name+"(") && !inC {
			missing = append(missing, name)
		}
	}
	if n < 30 {
		t.Fatalf("found only %d FL_API functions in the header: is the pattern out of date?", n)
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("not called by the binding: %v", missing)
	}
}

func TestVersion(t *testing.T) {
	v := Version()
	var major, minor, patch uint32
	if _, err := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); err != nil ||
		fmt.Sprintf("%d.%d.%d", major, minor, patch) != v {
		t.Fatalf("Version() = %q", v)
	}
	if n := VersionNumber(); n != major<<16|minor<<8|patch {
		t.Fatalf("VersionNumber() = %#x for %q", n, v)
	}

	// The token layout helpers against a real token and the region's epoch.
	r := startDaemon(t).open(t)
	l := mustAcquire(t, r, "k", time.Second)
	info, err := r.Info()
	if err != nil {
		t.Fatal(err)
	}
	if TokenEpoch(l.Token) != info.Epoch || TokenCounter(l.Token) == 0 ||
		TokenEpoch(l.Token)<<TokenEpochShift|TokenCounter(l.Token) != l.Token || l.Token > TokenMax {
		t.Fatalf("token %#x: epoch %d counter %d, region epoch %d", l.Token, TokenEpoch(l.Token),
			TokenCounter(l.Token), info.Epoch)
	}
	if _, err := r.Acquire(context.Background(), strings.Repeat("k", KeyMax), time.Second); err != nil {
		t.Fatalf("a key of KeyMax bytes: %v", err)
	}
	if os.Setenv(RegionEnv, r.Path()) != nil {
		t.Fatal("setenv")
	}
	defer os.Unsetenv(RegionEnv)
	if p, err := DefaultRegionPath(); err != nil || p != r.Path() {
		t.Fatalf("with %s set: %q %v", RegionEnv, p, err)
	}
}

// CommitToken: the fenced commit of a key and token without the Lease.
func TestCommitToken(t *testing.T) { /* I2 I8 */
	r := startDaemon(t).open(t)
	a := mustAcquire(t, r, "k", 10*time.Second)
	if acc, err := r.CommitToken("k", a.Token, "rec", []byte("by a"), false); err != nil || acc != a.Token {
		t.Fatalf("commit with a's token: %d %v", acc, err)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	b := mustAcquire(t, r, "k", 10*time.Second)
	if acc, err := r.CommitToken("k", b.Token, "rec", []byte("by b"), false); err != nil || acc != b.Token {
		t.Fatalf("commit with b's token: %d %v", acc, err)
	}
	data, fence, err := r.Read("rec")
	if err != nil || string(data) != "by b" || fence != b.Token {
		t.Fatalf("read: %q %d %v", data, fence, err)
	}

	// Stale: a's token after b's commit, and b's own again under strict.
	acc, err := r.CommitToken("k", a.Token, "rec", []byte("late a"), false)
	var se *StaleError
	if !errors.As(err, &se) || !errors.Is(err, ErrStale) || !errors.Is(err, ErrOwnershipLost) ||
		!errors.Is(err, syscall.ESTALE) || acc != b.Token || se.Accepted != b.Token ||
		se.Token != a.Token || se.Key != "k" || se.Record != "rec" || se.Op != "commit" {
		t.Fatalf("stale commit: %d %#v", acc, err)
	}
	if _, err := r.CommitToken("k", b.Token, "rec", []byte("again"), true); !errors.As(err, &se) ||
		se.Accepted != b.Token {
		t.Fatalf("strict commit of an accepted token: %v", err)
	}
	if data, _, _ := r.Read("rec"); string(data) != "by b" {
		t.Fatalf("a refused commit wrote %q", data)
	}

	// Scope: rec is bound to k.
	o := mustAcquire(t, r, "other", 10*time.Second)
	if _, err := r.CommitToken("other", o.Token, "rec", nil, false); !errors.Is(err, ErrScope) ||
		!errors.Is(err, syscall.EXDEV) {
		t.Fatalf("commit to another key's record: %v", err)
	}

	// A key never acquired issued no token: ErrNotFound, nothing created.
	if _, err := r.CommitToken("never", 1, "rec2", []byte("x"), false); !errors.Is(err, ErrNotFound) ||
		!errors.Is(err, syscall.ENOENT) {
		t.Fatalf("commit with a key never acquired: %v", err)
	}
	if _, _, err := r.Read("rec2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rec2 after a refused commit: %v", err)
	}
	// Tokens the key never issued.
	for _, tok := range []uint64{0, b.Token + 1} {
		if _, err := r.CommitToken("k", tok, "rec", nil, false); !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	if _, err := r.CommitToken("k\x00x", b.Token, "rec", nil, false); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("NUL in key: %v", err)
	}
	r.Close()
	if _, err := r.CommitToken("k", b.Token, "rec", nil, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// Key handles: Key resolves once, AcquireKey takes the same lock with the
// same token sequence as Acquire; a Key of another Region is refused.
func TestKeyHandle(t *testing.T) { /* I1 I9 */
	d := startDaemon(t)
	r, other := d.open(t), d.open(t)
	k, err := r.Key("jobs/1")
	if err != nil || k.Name != "jobs/1" {
		t.Fatalf("Key: %v %v", k, err)
	}
	var last uint64
	for i := 0; i < 6; i++ {
		var l *Lease
		if i%2 == 0 {
			l, err = r.AcquireKey(context.Background(), k, time.Minute)
		} else {
			l, err = r.Acquire(context.Background(), "jobs/1", time.Minute)
		}
		if err != nil || l.Key != "jobs/1" || l.Token <= last || (last != 0 && l.Token != last+1) {
			t.Fatalf("acquisition %d: %+v %v (last token %d)", i, l, err, last)
		}
		last = l.Token
		if _, err := r.Commit(l, "jobs/1/out", []byte("x"), false); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	}
	// Held elsewhere: a try is ErrBusy, a deadline ends the wait.
	h := mustAcquire(t, other, "jobs/1", time.Minute)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.AcquireKey(done, k, time.Minute); !errors.Is(err, ErrBusy) ||
		!errors.Is(err, syscall.EBUSY) {
		t.Fatalf("try of a held key by handle: %v", err)
	}
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if _, err := r.AcquireKey(ctx, k, time.Minute); !errors.Is(err, ErrBusy) ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed wait by handle: %v", err)
	}
	stop()
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	// Another Region's Key; bad names.
	if _, err := other.AcquireKey(context.Background(), k, time.Minute); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("a Key of another Region: %v", err)
	}
	if _, err := r.Key(""); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := r.Key("a\x00b"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("NUL in key: %v", err)
	}
	r.Close()
	if _, err := r.Key("jobs/1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := r.AcquireKey(context.Background(), k, time.Minute); !errors.Is(err, ErrClosed) {
		t.Fatalf("AcquireKey after Close: %v", err)
	}
}

// A Region opened with no supervisor running is unregistered and listed
// by Unregistered until it is closed.
func TestUnregistered(t *testing.T) { /* I10 */
	d := startDaemon(t)
	registered := d.open(t)
	d.stop()
	before := time.Now()
	r, err := Open(d.region)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Registered() {
		t.Fatal("registered with no supervisor")
	}
	l := mustAcquire(t, r, "k", time.Second) // works on, by leases
	if _, err := r.Commit(l, "rec", []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	list, err := registered.Unregistered()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("Unregistered: %+v", list)
	}
	u := list[0]
	if u.PID != uint32(os.Getpid()) || u.UID != uint32(os.Getuid()) || u.StartTime == 0 ||
		(u.Reason != syscall.ECONNREFUSED && u.Reason != syscall.ENOENT) ||
		u.Opened.Before(before.Add(-time.Second)) || u.Opened.After(time.Now().Add(time.Second)) {
		t.Fatalf("Unregistered: %+v (reason %v)", u, u.Reason)
	}
	ro, err := OpenReadOnly(d.region)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if list, err := ro.Unregistered(); err != nil || len(list) != 1 || list[0] != u {
		t.Fatalf("read-only: %+v %v", list, err)
	}
	r.Close()
	if list, err := ro.Unregistered(); err != nil || len(list) != 0 {
		t.Fatalf("after Close: %+v %v", list, err)
	}
	if _, err := r.Unregistered(); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// Info().ClientsRefused counts the registrations a full client table
// refused (Open: EUSERS).
func TestClientsRefused(t *testing.T) {
	d := startDaemon(t, "--clients", "1")
	// The start-up check's client may hold the one entry for a moment.
	var first *Region
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, err := Open(d.region)
		if err == nil {
			first = r
			break
		}
		if !errors.Is(err, syscall.EUSERS) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer first.Close()
	info, err := first.Info()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(d.region); !errors.Is(err, syscall.EUSERS) {
		t.Fatalf("second client with --clients 1: %v", err)
	}
	after, err := first.Info()
	if err != nil || after.ClientsRefused != info.ClientsRefused+1 {
		t.Fatalf("ClientsRefused %d then %d (%v)", info.ClientsRefused, after.ClientsRefused, err)
	}
}

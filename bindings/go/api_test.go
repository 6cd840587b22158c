package fencelock

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

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

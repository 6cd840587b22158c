package fencelock

/*
#include <stdint.h>
#include <fencelock.h>
#include "flgo.h"

// The commits, as the hot calls of lease.go: the region as uintptr_t, the
// names as Go strings, the accepted token returned with the result (an
// out-parameter in Go memory would move to the heap on every call).
typedef struct {
    int rc;
    uint64_t accepted;
} flgo_commit_result;

static flgo_commit_result flgo_commit(uintptr_t r, const fl_lease *lease, _GoString_ record,
                                      const void *data, size_t len, unsigned flags)
{
    char rec[FL_KEY_MAX + 2];
    flgo_commit_result res = {0, 0};
    res.rc = fl_commit((fl_region *)r, lease, flgo_name(rec, record), data, len, flags,
                       &res.accepted);
    return res;
}

static flgo_commit_result flgo_commit_u64(uintptr_t r, const fl_lease *lease, _GoString_ record,
                                          uint64_t value, unsigned flags)
{
    char rec[FL_KEY_MAX + 2];
    flgo_commit_result res = {0, 0};
    res.rc = fl_commit_u64((fl_region *)r, lease, flgo_name(rec, record), value, flags,
                           &res.accepted);
    return res;
}

static flgo_commit_result flgo_commit_token(uintptr_t r, _GoString_ key, uint64_t token,
                                            _GoString_ record, const void *data, size_t len,
                                            unsigned flags)
{
    char k[FL_KEY_MAX + 2], rec[FL_KEY_MAX + 2];
    flgo_commit_result res = {0, 0};
    res.rc = fl_commit_token((fl_region *)r, flgo_name(k, key), token, flgo_name(rec, record),
                             data, len, flags, &res.accepted);
    return res;
}
*/
import "C"

import (
	"runtime"
	"syscall"
	"unsafe"
)

// Commit writes data to record, fenced by l.Token: it takes effect if and
// only if the token is >= the greatest the record has accepted (> with
// strict), in one atomic step.  The record is created by its first commit
// and bound to the lease's key.  It returns the accepted token (l.Token on
// success).  Errors: a *StaleError (ErrStale, ErrOwnershipLost) carrying the
// token the record had accepted; ErrScope if the record belongs to another
// key; an *Error with EMSGSIZE, EINVAL, ENOSPC or EPROTO otherwise.  It
// checks the token against the record, not the lease's deadline.  A Lease
// of another Region (another region file, or another Open of the same one)
// is refused with EINVAL: it names a lock of that handle.
func (r *Region) Commit(l *Lease, record string, data []byte, strict bool) (accepted uint64, err error) {
	if e := r.issued("commit", l); e != nil {
		return 0, e
	}
	e, acc, err := r.commitCall(record, func(c C.uintptr_t) C.flgo_commit_result {
		return C.flgo_commit(c, &l.c, record, dataPtr(data), C.size_t(len(data)), commitFlags(strict))
	})
	if err != nil {
		return 0, err
	}
	return acc, stale(e, l, record, acc)
}

// CommitU64 commits one 64-bit value (8 bytes, little-endian): the
// fenced-pointer pattern.  Errors as Commit.
func (r *Region) CommitU64(l *Lease, record string, value uint64, strict bool) (accepted uint64, err error) {
	if e := r.issued("commit", l); e != nil {
		return 0, e
	}
	e, acc, err := r.commitCall(record, func(c C.uintptr_t) C.flgo_commit_result {
		return C.flgo_commit_u64(c, &l.c, record, C.uint64_t(value), commitFlags(strict))
	})
	if err != nil {
		return 0, err
	}
	return acc, stale(e, l, record, acc)
}

// CommitToken is Commit for a holder that has the key and the token but
// not the Lease: a program run by `fencelock run`, which finds them in
// $FENCELOCK_KEY and $FENCELOCK_TOKEN, or one handed them by another
// process (fl_commit_token()).  token must be one that key issued (0 <
// token <= the key's newest token); then the commit is Commit's: it takes
// effect if and only if token >= the greatest token the record accepted (>
// with strict), and a new record is bound to key.  Like Commit, it proves
// nothing about current ownership, only which acquisition the token came
// from: a newer holder's first commit shuts it out.
//
// Errors as Commit: a *StaleError (ErrStale, ErrOwnershipLost) carrying
// the token the record had accepted; ErrScope if the record is bound to
// another key; and ErrNotFound (an *Error with ENOENT) if key was never
// acquired in this region, so it issued no token (nothing is created); an
// *Error with EINVAL for token 0 or a token greater than any key issued.
func (r *Region) CommitToken(key string, token uint64, record string, data []byte, strict bool) (accepted uint64, err error) {
	if e := checkName("commit", "key", key); e != nil {
		return 0, e
	}
	e, acc, err := r.commitCall(record, func(c C.uintptr_t) C.flgo_commit_result {
		return C.flgo_commit_token(c, key, C.uint64_t(token), record, dataPtr(data),
			C.size_t(len(data)), commitFlags(strict))
	})
	if err != nil {
		return 0, err
	}
	if e != nil && e.Errno == syscall.ENOENT {
		e.kind = ErrNotFound
	}
	return acc, staleError(e, key, token, record, acc)
}

// commitCall is what every commit shares: the record name's check, the
// region's read lock (Close cannot unmap under the call), and the call
// with fl_last_error() read on the same OS thread (as call does).  err is
// for an unusable name or a closed region; e is the C call's error, for
// the caller to classify.
func (r *Region) commitCall(record string, f func(c C.uintptr_t) C.flgo_commit_result) (e *Error, accepted uint64, err error) {
	if cerr := checkName("commit", "record name", record); cerr != nil {
		return nil, 0, cerr
	}
	c, err := r.handle("commit")
	if err != nil {
		return nil, 0, err
	}
	defer r.mu.RUnlock()
	runtime.LockOSThread()
	res := f(handleArg(c))
	if res.rc < 0 {
		e = newError("commit", syscall.Errno(-res.rc), C.GoString(C.fl_last_error()))
	}
	runtime.UnlockOSThread()
	return e, uint64(res.accepted), nil
}

// dataPtr is data's first byte for C, nil for an empty slice.
func dataPtr(data []byte) unsafe.Pointer {
	if len(data) == 0 {
		return nil
	}
	return unsafe.Pointer(&data[0])
}

func commitFlags(strict bool) C.unsigned {
	if strict {
		return C.FL_COMMIT_STRICT
	}
	return 0
}

// Read returns the current value of record (exactly the bytes of one
// accepted commit) and the token that wrote it.  ErrNotFound if it was
// never committed; an *Error with EBADMSG if fencelockd could not vouch for
// it after an unclean stop (the next commit replaces it).
func (r *Region) Read(record string) (data []byte, fence uint64, err error) {
	name, cerr := cString("read", "record name", record)
	if cerr != nil {
		return nil, 0, cerr
	}
	c, err := r.handle("read")
	if err != nil {
		return nil, 0, err
	}
	defer r.mu.RUnlock()
	buf := make([]byte, r.readCap)
	for {
		var n C.size_t
		var f C.uint64_t
		e := call("read", func() C.int {
			return C.fl_read(c, cptr(name), unsafe.Pointer(&buf[0]), C.size_t(len(buf)), &n, &f)
		})
		if e == nil {
			return buf[:n:n], uint64(f), nil
		}
		if e.Errno != syscall.ENOBUFS {
			return nil, 0, readError(e)
		}
		// The value is longer than buf: *len is its length (it may have
		// grown again by the next try; then we grow again).
		buf = make([]byte, int(n))
	}
}

// ReadU64 reads a record written by CommitU64.  An *Error with EPROTO if the
// record does not hold exactly 8 bytes; ErrNotFound as Read.
func (r *Region) ReadU64(record string) (value, fence uint64, err error) {
	name, cerr := cString("read", "record name", record)
	if cerr != nil {
		return 0, 0, cerr
	}
	c, err := r.handle("read")
	if err != nil {
		return 0, 0, err
	}
	defer r.mu.RUnlock()
	var v, f C.uint64_t
	e := call("read", func() C.int { return C.fl_read_u64(c, cptr(name), &v, &f) })
	if e != nil {
		return 0, 0, readError(e)
	}
	return uint64(v), uint64(f), nil
}

func readError(e *Error) error {
	if e.Errno == syscall.ENOENT {
		e.kind = ErrNotFound
	}
	return e
}

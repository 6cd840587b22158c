package fencelock

/*
#include <fencelock.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"
)

// Sentinels for errors.Is.  The errors returned are *Error or *StaleError
// values that match them; compare with errors.Is, never with ==.
var (
	// ErrBusy: Acquire ended without the lock (the key stayed held until
	// ctx was done, or a try of a held key).  The error also matches
	// ctx.Err() when the context ended the wait.
	ErrBusy = errors.New("fencelock: key is held")
	// ErrStale: a token older than one already accepted (commit), or a
	// lease no longer current (renew, release).
	ErrStale = errors.New("fencelock: stale token")
	// ErrOwnershipLost wraps ErrStale: a stale commit, renew or release
	// means another holder has taken the key.  Stop; never retry with the
	// same token.
	ErrOwnershipLost = fmt.Errorf("fencelock: ownership lost: %w", ErrStale)
	// ErrScope: the record is fenced by another key than the lease's (EXDEV).
	ErrScope = errors.New("fencelock: record is bound to another key")
	// ErrNotFound: Read of a record never committed, or CommitToken with
	// a key never acquired in the region (ENOENT both).
	ErrNotFound = errors.New("fencelock: not found")
	// ErrClosed: a call on a closed Region (or a lease of one).
	ErrClosed = errors.New("fencelock: region is closed")
)

// Error is every failure other than a stale token: the operation, the errno
// the C library returned (errors.Is(err, syscall.EBUSY) works through
// Unwrap) and fl_last_error()'s description of it.
type Error struct {
	Errno   syscall.Errno
	Op      string
	Message string
	kind    error // the sentinel it matches, if any
	cause   error // what ended an acquire wait (ctx.Err()), if any
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		if msg = C.GoString(C.fl_strerror(C.int(-e.Errno))); msg == "unknown error" {
			msg = e.Errno.Error()
		}
	}
	s := "fencelock: " + e.Op + ": " + msg + " (" + errnoName(e.Errno) + ")"
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// errnoName is the errno's symbolic name: fl_err_name's (which names the
// bindings' EBADF and EALREADY too since issue 26), this table's for those
// an older library answers "E?" for, else "errno N".
func errnoName(errno syscall.Errno) string {
	if n := C.GoString(C.fl_err_name(C.int(-errno))); n != "E?" {
		return n
	}
	if n, ok := bindingErrnoNames[errno]; ok {
		return n
	}
	return fmt.Sprintf("errno %d", int(errno))
}

// The errnos the binding itself gives: EBADF for a closed Region
// (ErrClosed), EALREADY for a second keepalive of a lease; a dup of the
// keepalive's fd may fail with EBADF or EMFILE (the C library knows EMFILE).
var bindingErrnoNames = map[syscall.Errno]string{
	syscall.EBADF:    "EBADF",
	syscall.EALREADY: "EALREADY",
}

// Unwrap gives the errno.
func (e *Error) Unwrap() error { return e.Errno }

// Is matches the sentinel of the error's kind and, for an acquire that its
// context ended, ctx.Err().
func (e *Error) Is(target error) bool {
	return target != nil && (target == e.kind || target == e.cause)
}

// errnoKind maps an errno to the sentinel it means in any operation.
// ENOENT is ErrNotFound only for reads (for Open it means a missing region
// file: errors.Is(err, os.ErrNotExist)); the read wrappers set it.
var errnoKind = map[syscall.Errno]error{
	syscall.EBUSY:     ErrBusy,
	syscall.ETIMEDOUT: ErrBusy,
	syscall.EXDEV:     ErrScope,
	syscall.ESTALE:    ErrOwnershipLost,
}

func newError(op string, errno syscall.Errno, msg string) *Error {
	return &Error{Errno: errno, Op: op, Message: msg, kind: errnoKind[errno]}
}

// StaleError is the failure of a commit, renew or release whose token is no
// longer current: errors.Is(err, ErrStale), errors.Is(err,
// ErrOwnershipLost) and errors.Is(err, syscall.ESTALE) all hold.
type StaleError struct {
	Op       string // "commit" (Commit, CommitU64, CommitToken), "renew", "release"
	Key      string // the lease's key (CommitToken: the key given)
	Record   string // the record, for a commit
	Token    uint64 // the token that was refused
	Accepted uint64 // commit: the greatest token the record had accepted; else 0
	Message  string // fl_last_error()
}

func (e *StaleError) Error() string {
	s := fmt.Sprintf("fencelock: %s: ownership lost: token %d", e.Op, e.Token)
	if e.Record != "" {
		s += fmt.Sprintf(" refused by record %q, which accepted %d", e.Record, e.Accepted)
	}
	if e.Message != "" {
		s += " (" + e.Message + ")"
	}
	return s
}

// Unwrap gives ErrOwnershipLost (which wraps ErrStale).
func (e *StaleError) Unwrap() error { return ErrOwnershipLost }

// Is matches syscall.ESTALE.
func (e *StaleError) Is(target error) bool { return target == syscall.ESTALE }

// stale turns an ESTALE *Error into a *StaleError; other errors pass.
func stale(err *Error, l *Lease, record string, accepted uint64) error {
	return staleError(err, l.Key, l.Token, record, accepted)
}

func staleError(err *Error, key string, token uint64, record string, accepted uint64) error {
	if err == nil {
		return nil
	}
	if err.Errno != syscall.ESTALE {
		return err
	}
	return &StaleError{Op: err.Op, Key: key, Record: record, Token: token,
		Accepted: accepted, Message: err.Message}
}

// orNil converts a nil *Error into a nil error (a nil *Error in an error
// interface is not nil).
func (e *Error) orNil() error {
	if e == nil {
		return nil
	}
	return e
}

// Package fencelock is the Go binding of libfencelock: leased locks with
// fencing tokens for the processes of one host.
//
// A Region is one region file kept by fencelockd.  Acquire returns a Lease
// whose Token is greater than every earlier token of its key.  A lease can
// end while its holder is paused (SIGSTOP, GC, swap), so the lock alone does
// not protect a resource: Commit is the fenced write, and a Commit with a
// token older than one the record has accepted fails with ErrStale (also
// ErrOwnershipLost).  Stop then; never retry with the same token.
//
// Every method may be called from any goroutine; one Region may be shared.
// The C library's errors are negative errno values with a per-thread
// message (fl_last_error()); each wrapper locks its goroutine to the OS
// thread for the call and the read of that message, so the message in an
// *Error is the one of that call.  Errors: ErrBusy, ErrStale,
// ErrOwnershipLost, ErrScope, ErrNotFound, ErrClosed as sentinels for
// errors.Is; the errno in every *Error for errors.Is(err, syscall.EXXX).
//
// Every public function of fencelock.h is used: the C cancellation objects
// (fl_cancel_*) through a context.Context given to Acquire, the keepalive's
// fd and status inside KeepAlive, fl_strerror, fl_err_name and
// fl_last_error in the errors.
//
// A Region belongs to the process that opened it (a forked child gets
// ECHILD); Go programs fork only through os/exec, so this rarely matters.
package fencelock

/*
#cgo pkg-config: fencelock
#include <stdlib.h>
#include <time.h>
#include <fencelock.h>

static uint64_t flgo_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
*/
import "C"

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Region is this process's handle on one region file.
type Region struct {
	// mu is read-held by every call that uses c; Close takes it for
	// writing, so no call can run on an unmapped region.
	mu   sync.RWMutex
	c    *C.fl_region
	path string
	// readCap is the first buffer size Read tries (grown on ENOBUFS).
	readCap int

	kaMu       sync.Mutex
	keepalives map[*keepalive]struct{} // running; Close stops them first

	// Cancellation of waits (see Acquire): every fl_cancel this Region
	// made, and those not in use by a wait.  Close sets closing and
	// triggers them all, which ends every wait, then frees them once it
	// holds mu for writing (no wait and no trigger can use one then).
	cancelMu sync.Mutex
	closing  atomic.Bool // set under cancelMu, read without it by the fast path
	cancels  []*C.fl_cancel
	idle     []*C.fl_cancel
	// spare is one idle cancel (nil if none) lent and given back without
	// cancelMu: the uncontended Acquire takes and returns one per call.
	// It is one of cancels, so Close triggers and frees it too.
	spare atomic.Pointer[C.fl_cancel]
}

// call runs one C function on a locked OS thread and, if it returns a
// negative errno, reads fl_last_error() on that same thread (the message is
// per thread, and a goroutine may move to another thread between two cgo
// calls).  Every wrapper goes through it, so wrapping another C function is
// one call: err := call("op", func() C.int { return C.fl_xxx(...) }).
func call(op string, f func() C.int) *Error {
	runtime.LockOSThread()
	rc := f()
	if rc >= 0 {
		runtime.UnlockOSThread()
		return nil
	}
	msg := C.GoString(C.fl_last_error())
	runtime.UnlockOSThread()
	return newError(op, syscall.Errno(-rc), msg)
}

// handle returns the C handle with r.mu read-held; the caller must call
// r.mu.RUnlock() when it returns nil error, after its C calls.  That
// unlock is a use of r after the calls, so r stays reachable through them
// and its finalizer (see Open) cannot close the handle under a call.
func (r *Region) handle(op string) (*C.fl_region, error) {
	r.mu.RLock()
	if r.c == nil {
		r.mu.RUnlock()
		return nil, closedError(op)
	}
	return r.c, nil
}

func closedError(op string) *Error {
	return &Error{Errno: syscall.EBADF, Op: op, Message: "region is closed", kind: ErrClosed}
}

// cString returns s as a NUL-terminated byte slice for C.  A Go string may
// contain NUL bytes; C would silently cut the name there (and "a\x00b"
// would name the key "a"), so such names are refused.
func cString(op, what, s string) ([]byte, *Error) {
	if e := checkName(op, what, s); e != nil {
		return nil, e
	}
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b, nil
}

func cptr(b []byte) *C.char { return (*C.char)(unsafe.Pointer(&b[0])) }

// checkName is cString's check without the copy, for the calls whose C
// side copies the Go string itself.
func checkName(op, what, s string) *Error {
	if strings.IndexByte(s, 0) >= 0 {
		return &Error{Errno: syscall.EINVAL, Op: op, Message: what + " contains a NUL byte"}
	}
	return nil
}

// handleArg passes a region handle to the C helpers that take it as an
// integer (lease.go says why).  It is C memory: the garbage collector
// neither sees nor moves it.
func handleArg(c *C.fl_region) C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(c))) }

// Open opens a region and registers this process with its supervisor.
// region "" means $FENCELOCK_REGION if set, else DefaultRegionPath().  With
// no supervisor running the region is still opened, unregistered (see
// Registered).  A region file that does not exist gives an error for which
// errors.Is(err, os.ErrNotExist) holds; one not ready yet (fencelockd
// starting) gives syscall.EAGAIN.
//
// Close a Region when done with it.  One that becomes unreachable without
// Close is closed by a finalizer, as an *os.File is: its locks are
// released as if the process had died, its supervisor client entry (of
// fencelockd --clients, whose exhaustion makes other processes' Open fail
// with EUSERS) is freed, its fds and thread are closed.  That happens at
// some garbage collection after it was dropped, not at once.  A Region
// stays reachable while any of its Leases, Keys, waits or running
// keepalives is.
func Open(region string) (*Region, error) {
	return open("open", region, func(p *C.char, out **C.fl_region) C.int { return C.fl_open(p, out) })
}

// OpenReadOnly opens a region for inspection only (Info, Locks, Records,
// Clients, Unregistered, Read, ReadU64), without registering.
func OpenReadOnly(region string) (*Region, error) {
	return open("open read-only", region, func(p *C.char, out **C.fl_region) C.int {
		return C.fl_open_readonly(p, out)
	})
}

func open(op, region string, f func(*C.char, **C.fl_region) C.int) (*Region, error) {
	var p *C.char
	if region != "" {
		b, err := cString(op, "region path", region)
		if err != nil {
			return nil, err
		}
		p = cptr(b)
	}
	var c *C.fl_region
	if err := call(op, func() C.int { return f(p, &c) }); err != nil {
		return nil, err
	}
	r := &Region{c: c, path: C.GoString(C.fl_region_path(c)), readCap: 256,
		keepalives: map[*keepalive]struct{}{}}
	var info C.fl_region_info
	if C.fl_region_info_get(c, &info) == 0 && int(info.record_size) < r.readCap {
		r.readCap = int(info.record_size)
	}
	// (Nothing r refers to refers back to it, but a running keepalive: a
	// cycle through r would keep the finalizer from ever running.)  Close
	// runs in a goroutine of its own: fl_close may take a network
	// backend's request timeout, and one goroutine runs every finalizer.
	runtime.SetFinalizer(r, func(r *Region) { go r.Close() })
	return r, nil
}

// Close stops the region's running keepalives and ends its waits (their
// Acquire returns ErrClosed), then unmaps the region and ends the
// registration.  Locks still held through it are released as if
// the process had died (their next holders see OwnerDiedPrevious).  Leases
// of the region must not be used afterwards: their calls return ErrClosed.
// Closing twice is harmless.
func (r *Region) Close() error {
	runtime.SetFinalizer(r, nil)
	r.kaMu.Lock()
	kas := make([]*keepalive, 0, len(r.keepalives))
	for ka := range r.keepalives {
		kas = append(kas, ka)
	}
	r.kaMu.Unlock()
	for _, ka := range kas {
		ka.stop()
	}
	r.cancelMu.Lock()
	r.closing.Store(true)
	for _, w := range r.cancels {
		C.fl_cancel_trigger(w)
	}
	r.cancelMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	// A KeepAlive that registered after the copy above (it holds mu for
	// reading, so none can register now): stopped before fl_close frees it.
	// ka.stop takes l.mu only, and no holder of l.mu waits for mu.
	r.kaMu.Lock()
	kas = kas[:0]
	for ka := range r.keepalives {
		kas = append(kas, ka)
	}
	r.kaMu.Unlock()
	for _, ka := range kas {
		ka.stop()
	}
	if r.c != nil {
		C.fl_close(r.c)
		r.c = nil
	}
	r.cancelMu.Lock()
	for _, w := range r.cancels {
		C.fl_cancel_free(w)
	}
	r.cancels, r.idle = nil, nil
	r.spare.Store(nil)
	r.cancelMu.Unlock()
	return nil
}

// Version is the version of the libfencelock loaded at run time,
// "MAJOR.MINOR.PATCH" (fl_version()); it may be newer than the header the
// binding was compiled with (same major version).
func Version() string { return C.GoString(C.fl_version()) }

// VersionNumber is the loaded library's version as 0xMMmmpp (major, minor,
// patch one byte each), so versions compare as integers
// (fl_version_number()).
func VersionNumber() uint32 { return uint32(C.fl_version_number()) }

// Limits and token layout of include/fencelock.h.
const (
	// KeyMax is the longest key or record name, in bytes (FL_KEY_MAX).
	KeyMax = 127
	// TokenMax is the greatest token the library hands out: tokens fit a
	// SQL BIGINT (FL_TOKEN_MAX).
	TokenMax uint64 = 9223372036854775807 // 1<<63 - 1
	// TokenEpochShift: a token is epoch << TokenEpochShift | counter
	// (FL_TOKEN_EPOCH_SHIFT).
	TokenEpochShift = 40
	// RegionEnv names the environment variable that Open("") reads
	// (FL_REGION_ENV).
	RegionEnv = "FENCELOCK_REGION"
	// UnregisteredMax is the size of the region's table of unregistered
	// clients (FL_UNREGISTERED_MAX; see Unregistered).
	UnregisteredMax = 32
)

// The constants above are the header's (written out, so that `go doc`
// shows their values): these fail to compile if not, as a map literal with
// two equal constant keys (false, false) does not compile.
var _ = map[bool]int{false: 0, KeyMax == C.FL_KEY_MAX: 1}
var _ = map[bool]int{false: 0, TokenEpochShift == C.FL_TOKEN_EPOCH_SHIFT: 1}
var _ = map[bool]int{false: 0, UnregisteredMax == C.FL_UNREGISTERED_MAX: 1}
var _ = map[bool]int{false: 0, TokenMax == C.FL_TOKEN_MAX: 1}
var _ = map[bool]int{false: 0, RegionEnv == C.FL_REGION_ENV: 1}

// TokenEpoch is the epoch part of a token (it advances at every
// supervisor start).
func TokenEpoch(token uint64) uint64 { return token >> TokenEpochShift }

// TokenCounter is the counter part of a token (acquisitions of its key
// within the epoch).
func TokenCounter(token uint64) uint64 { return token & (1<<TokenEpochShift - 1) }

// Path is the region file this handle maps.
func (r *Region) Path() string { return r.path }

// Backend is the backend Open chose from the region string: "shm" (a
// region file) or "etcd" (an etcd:// or etcds:// cluster).
func (r *Region) Backend() string {
	c, err := r.handle("backend")
	if err != nil {
		return ""
	}
	defer r.mu.RUnlock()
	return C.GoString(C.fl_region_backend(c))
}

// Registered reports whether the handle is registered with a supervisor
// (death detection on).  False for a closed or read-only handle.  An
// unregistered handle (no supervisor answered, or its socket refused this
// process) is listed by Unregistered, with the reason, until it is closed.
func (r *Region) Registered() bool {
	c, err := r.handle("registered")
	if err != nil {
		return false
	}
	defer r.mu.RUnlock()
	return C.fl_region_registered(c) == 1
}

// DefaultRegionPath is the region used when none is given
// (fl_default_region_path()): $FENCELOCK_REGION if set; else for root
// /run/fencelock/region; else $XDG_RUNTIME_DIR/fencelock/region; only when
// that directory does not exist, /dev/shm/fencelock-<uid>/region.
func DefaultRegionPath() (string, error) {
	buf := make([]byte, 4096)
	if err := call("default region path", func() C.int {
		return C.fl_default_region_path(cptr(buf), C.size_t(len(buf)))
	}); err != nil {
		return "", err
	}
	return C.GoString(cptr(buf)), nil
}

// Deadlines: the C library gives CLOCK_MONOTONIC nanoseconds (the caller's
// own, time namespaces included).  Go's monotonic clock is CLOCK_MONOTONIC
// too, but a time.Time cannot be built from a raw reading, so both clocks are
// read once at start-up and every deadline is monoBase's time.Time plus the
// difference.  The result carries a monotonic reading: Sub, Before, After
// and time.Until compare it with time.Now() exactly (to the microsecond or
// so of the start-up reading).  Its wall-clock part is for display only and
// drifts from the wall clock when that is stepped.
var monoBase uint64
var timeBase time.Time

func init() {
	m1 := uint64(C.flgo_mono_ns())
	timeBase = time.Now()
	m2 := uint64(C.flgo_mono_ns())
	monoBase = m1 + (m2-m1)/2
}

func monoToTime(ns uint64) time.Time {
	return timeBase.Add(time.Duration(int64(ns - monoBase)))
}

// durationNs converts a lease length for C: 0 for a negative one, which C
// refuses with EINVAL like 0.
func durationNs(d time.Duration) C.uint64_t {
	if d < 0 {
		return 0
	}
	return C.uint64_t(d)
}

package fencelock

/*
#include <fencelock.h>
*/
import "C"

import (
	"os"
	"sync"
	"syscall"
)

// Keepalive design: the C library renews from its own thread and reports a
// loss two ways, a callback on that thread and an eventfd that becomes
// readable.  This binding watches the eventfd from a goroutine through Go's
// netpoller (a dup of the fd, which the C library made non-blocking), and
// never passes a callback into C.  Why not the callback with a
// runtime/cgo.Handle: it would run Go code on a C thread while that thread
// has other leases to renew (a GC stop or a slow onLost would delay their
// renewals), and onLost could not call stop or Release (C forbids
// fl_keepalive_stop from inside on_lost; it would deadlock).  A goroutine
// costs nothing while it waits, and onLost runs in it as ordinary Go code.

type keepalive struct {
	l        *Lease
	k        *C.fl_keepalive
	f        *os.File      // our dup of fl_keepalive_fd(k), closed by stop
	watching chan struct{} // closed when the watcher will not start onLost any more

	mu      sync.Mutex
	stopped bool
	once    sync.Once
}

// KeepAlive keeps the lease renewed from a background thread of the C
// library, each renewal extending it by the length last given to Acquire
// or Renew (renewing when a third of it has passed); Deadline follows the
// renewals.  When a renewal fails (the process was stopped past its lease
// and the key taken over) the lease is lost: onLost, if not nil, is called
// once from its own goroutine, and the holder must stop using the lease.
// stop ends the renewals; it is idempotent, may be called from onLost, and
// once it has returned onLost is not started any more (one already running
// may still be).  Release stops the keepalive itself, and Region.Close
// stops all.  A Region with a running keepalive is in use: it is not
// closed when dropped (see Open) until stop, Release or Close.
func (l *Lease) KeepAlive(onLost func()) (stop func(), err error) {
	c, herr := l.handle("keepalive")
	if herr != nil {
		return nil, herr
	}
	defer l.r.mu.RUnlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ka != nil {
		return nil, &Error{Errno: syscall.EALREADY, Op: "keepalive", Message: "the lease already has a keepalive"}
	}
	ka := &keepalive{l: l, watching: make(chan struct{})}
	if e := call("keepalive", func() C.int {
		return C.fl_keepalive_start(c, &l.c, durationNs(l.length), nil, nil, &ka.k)
	}); e != nil {
		return nil, stale(e, l, "", 0)
	}
	fd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(C.fl_keepalive_fd(ka.k)),
		syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		C.fl_keepalive_stop(ka.k, nil)
		return nil, &Error{Errno: errno, Op: "keepalive", Message: "dup of the keepalive fd: " + errno.Error()}
	}
	// Non-blocking already (EFD_NONBLOCK), so os.NewFile makes it pollable.
	ka.f = os.NewFile(fd, "fencelock-keepalive")
	l.ka = ka
	l.r.kaMu.Lock()
	l.r.keepalives[ka] = struct{}{}
	l.r.kaMu.Unlock()
	go ka.watch(onLost)
	return ka.stop, nil
}

// watch waits until the eventfd is readable (the lease is lost) or stop
// closes our dup of it.
func (ka *keepalive) watch(onLost func()) {
	lost := false
	if rc, err := ka.f.SyscallConn(); err == nil {
		// The function decides readiness from the C status (not by reading
		// the eventfd); returning false waits in the netpoller.
		err = rc.Read(func(uintptr) bool { return C.fl_keepalive_status(ka.k, nil) != 0 })
		if err == nil {
			ka.mu.Lock()
			lost = !ka.stopped
			ka.mu.Unlock()
		}
	}
	close(ka.watching)
	if lost && onLost != nil {
		onLost()
	}
}

func (ka *keepalive) stop() {
	ka.once.Do(func() {
		ka.mu.Lock()
		ka.stopped = true
		ka.mu.Unlock()
		ka.f.Close() // wakes the watcher
		<-ka.watching
		l := ka.l
		l.mu.Lock()
		var latest C.fl_lease
		C.fl_keepalive_stop(ka.k, &latest)
		if latest.deadline_ns > l.c.deadline_ns { // a Renew meanwhile may be later
			l.c.deadline_ns = latest.deadline_ns
		}
		l.ka = nil
		l.mu.Unlock()
		l.r.kaMu.Lock()
		delete(l.r.keepalives, ka)
		l.r.kaMu.Unlock()
	})
}

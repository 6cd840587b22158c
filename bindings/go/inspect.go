package fencelock

/*
#include <fencelock.h>
*/
import "C"

import (
	"syscall"
	"time"
)

// RegionInfo describes a region (fl_region_info).  Wall-clock times are for
// display only; zero when never.
type RegionInfo struct {
	FormatVersion    uint32
	LockCapacity     uint32 // lock slots (keys) the region can hold
	LocksUsed        uint32
	RecordCapacity   uint32
	RecordsUsed      uint32
	RecordSize       uint32 // largest value a record holds, bytes
	BufferCount      uint32 // commit buffers: current values plus in-flight commits
	ClientCapacity   uint32
	FileSize         uint64
	Created          time.Time
	TokenFloor       uint64 // every new token is at least this
	Epoch            uint64
	RunState         uint32 // RunNever, RunStarted (it runs if Served, else it died) or RunClean
	Ready            bool   // a supervisor readied it in this boot
	Started          time.Time
	CleanStop        time.Time
	SupervisorPID    uint32
	SameBoot         bool
	Served           bool // a fencelockd serves it now
	RecordsUnvouched uint32
	ClientsRefused   uint64
	EventsDropped    uint64
	BootID           string
}

// LockInfo describes one key's lock slot (fl_lock_info).
type LockInfo struct {
	Key            string
	State          int    // LockFree, LockHeld or LockExpired
	Token          uint64 // latest token handed out (0: never)
	HolderPID      uint32
	HolderClient   uint32
	HolderClientID uint64
	LeaseLeft      time.Duration // negative: expired; 0 when free
	Waiters        uint32
	LastRelease    uint32 // 0 released, FL_LEASE_OWNER_DIED (2), FL_LEASE_EXPIRED (1)
	Acquisitions   uint64
	Contended      uint64
	ExpiriesTaken  uint64
	Deaths         uint64
	Renewals       uint64
	RenewFailed    uint64
	Releases       uint64
	ReleaseFailed  uint64
	LastStaleToken uint64
	LastStalePID   uint32
	LastStaleOp    uint32 // OpRenew or OpRelease, 0: none yet
	Busy           uint64
	Timeouts       uint64
}

// Lock states of LockInfo.State (FL_LOCK_*).
const (
	LockFree    int = 0 // nobody holds it
	LockHeld    int = 1 // held by an unexpired lease
	LockExpired int = 2 // held by a lease whose deadline has passed
)

// Run states of RegionInfo.RunState (FL_RUN_*): how the last supervisor's
// run went.
const (
	RunNever   uint32 = 0 // no supervisor has served the region
	RunStarted uint32 = 1 // one started and has not shut down cleanly: it runs (Served), or died
	RunClean   uint32 = 2 // the last one shut down cleanly
)

// Operations named by LockInfo.LastStaleOp and RecordInfo.LastRejectedOp
// (FL_OP_*).
const (
	OpCommit       uint32 = 1 // Commit, not strict
	OpStrictCommit uint32 = 2 // Commit with strict
	OpRenew        uint32 = 3 // Renew (or a keepalive's renewal)
	OpRelease      uint32 = 4 // Release
)

// The values above are written out so that `go doc` shows them; these fail
// to compile if one differs from the header's (see fencelock.go's).
var _ = map[bool]int{false: 0, LockFree == C.FL_LOCK_FREE: 1}
var _ = map[bool]int{false: 0, LockHeld == C.FL_LOCK_HELD: 1}
var _ = map[bool]int{false: 0, LockExpired == C.FL_LOCK_EXPIRED: 1}
var _ = map[bool]int{false: 0, RunNever == C.FL_RUN_NEVER: 1}
var _ = map[bool]int{false: 0, RunStarted == C.FL_RUN_STARTED: 1}
var _ = map[bool]int{false: 0, RunClean == C.FL_RUN_CLEAN: 1}
var _ = map[bool]int{false: 0, OpCommit == C.FL_OP_COMMIT: 1}
var _ = map[bool]int{false: 0, OpStrictCommit == C.FL_OP_STRICT_COMMIT: 1}
var _ = map[bool]int{false: 0, OpRenew == C.FL_OP_RENEW: 1}
var _ = map[bool]int{false: 0, OpRelease == C.FL_OP_RELEASE: 1}

// RecordInfo describes one fenced record (fl_record_info).
type RecordInfo struct {
	Name                 string
	BoundKey             string // the key that fences it ("" if unbound)
	AcceptedToken        uint64
	Version              uint64 // accepted commits
	Size                 uint32
	LastRejectedPID      uint32
	Commits              uint64
	Rejections           uint64
	LastRejectedToken    uint64
	LastRejectedAccepted uint64
	LastRejectedOp       uint32
	Unvouched            bool
	Repeats              uint64 // rejections of a recently rejected token: a client retrying
}

// ClientInfo describes one registered client (fl_client_info).
type ClientInfo struct {
	Index    uint32
	PID      uint32
	UID      uint32
	Attached bool
	ClientID uint64
}

// UnregisteredInfo describes a process that opened the region while it
// could not register with the supervisor (fl_unregistered_info): its locks
// outlive its death until their leases end.
type UnregisteredInfo struct {
	PID       uint32        // in the client's pid namespace
	UID       uint32        // its real uid
	Reason    syscall.Errno // why it is not registered: ECONNREFUSED or ENOENT (no supervisor listening), EACCES (the socket refused it), ...
	StartTime uint64        // the process's start, jiffies since boot (/proc/PID/stat)
	Opened    time.Time     // when it opened the region (wall clock, display only)
}

func unixTime(ns C.uint64_t) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(ns))
}

// Info describes the region.
func (r *Region) Info() (RegionInfo, error) {
	c, err := r.handle("info")
	if err != nil {
		return RegionInfo{}, err
	}
	defer r.mu.RUnlock()
	var i C.fl_region_info
	if e := call("info", func() C.int { return C.fl_region_info_get(c, &i) }); e != nil {
		return RegionInfo{}, e
	}
	return RegionInfo{
		FormatVersion: uint32(i.format_version), LockCapacity: uint32(i.lock_capacity),
		LocksUsed: uint32(i.locks_used), RecordCapacity: uint32(i.record_capacity),
		RecordsUsed: uint32(i.records_used), RecordSize: uint32(i.record_size),
		BufferCount: uint32(i.buffer_count), ClientCapacity: uint32(i.client_capacity),
		FileSize: uint64(i.file_size), Created: unixTime(i.created_unix_ns),
		TokenFloor: uint64(i.token_floor), Epoch: uint64(i.epoch), RunState: uint32(i.run_state),
		Ready: i.ready != 0, Started: unixTime(i.started_unix_ns), CleanStop: unixTime(i.clean_unix_ns),
		SupervisorPID: uint32(i.supervisor_pid), SameBoot: i.same_boot != 0, Served: i.served != 0,
		RecordsUnvouched: uint32(i.records_unvouched), EventsDropped: uint64(i.events_dropped),
		ClientsRefused: uint64(i.clients_refused),
		BootID:         C.GoString(&i.boot_id[0]),
	}, nil
}

// Locks describes every key's lock slot, in slot order (slots without a
// published key are left out).
func (r *Region) Locks() ([]LockInfo, error) {
	var out []LockInfo
	err := r.each("locks", 0, func(c *C.fl_region, idx uint32) *Error {
		var i C.fl_lock_info
		e := call("locks", func() C.int { return C.fl_lock_info_get(c, C.uint32_t(idx), &i) })
		if e == nil {
			out = append(out, LockInfo{
				Key: C.GoString(&i.key[0]), State: int(i.state), Token: uint64(i.token),
				HolderPID: uint32(i.holder_pid), HolderClient: uint32(i.holder_client),
				HolderClientID: uint64(i.holder_client_id), LeaseLeft: time.Duration(i.lease_left_ns),
				Waiters: uint32(i.waiters), LastRelease: uint32(i.last_release),
				Acquisitions: uint64(i.acquisitions), Contended: uint64(i.contended),
				ExpiriesTaken: uint64(i.expiries_taken), Deaths: uint64(i.deaths),
				Renewals: uint64(i.renewals), RenewFailed: uint64(i.renew_failed),
				Releases: uint64(i.releases), ReleaseFailed: uint64(i.release_failed),
				LastStaleToken: uint64(i.last_stale_token), LastStalePID: uint32(i.last_stale_pid),
				LastStaleOp: uint32(i.last_stale_op), Busy: uint64(i.busy), Timeouts: uint64(i.timeouts),
			})
		}
		return e
	})
	return out, err
}

// Records describes every fenced record, in table order.
func (r *Region) Records() ([]RecordInfo, error) {
	var out []RecordInfo
	err := r.each("records", 0, func(c *C.fl_region, idx uint32) *Error {
		var i C.fl_record_info
		e := call("records", func() C.int { return C.fl_record_info_get(c, C.uint32_t(idx), &i) })
		if e == nil {
			out = append(out, RecordInfo{
				Name: C.GoString(&i.name[0]), BoundKey: C.GoString(&i.bound_key[0]),
				AcceptedToken: uint64(i.accepted_token), Version: uint64(i.version),
				Size: uint32(i.size), LastRejectedPID: uint32(i.last_rejected_pid),
				Commits: uint64(i.commits), Rejections: uint64(i.rejections),
				LastRejectedToken:    uint64(i.last_rejected_token),
				LastRejectedAccepted: uint64(i.last_rejected_accepted),
				LastRejectedOp:       uint32(i.last_rejected_op), Unvouched: i.unvouched != 0,
				Repeats: uint64(i.repeats),
			})
		}
		return e
	})
	return out, err
}

// Clients describes every live registered client.
func (r *Region) Clients() ([]ClientInfo, error) {
	var out []ClientInfo
	err := r.each("clients", 1, func(c *C.fl_region, idx uint32) *Error {
		var i C.fl_client_info
		e := call("clients", func() C.int { return C.fl_client_info_get(c, C.uint32_t(idx), &i) })
		if e == nil {
			out = append(out, ClientInfo{Index: uint32(i.index), PID: uint32(i.pid), UID: uint32(i.uid),
				Attached: i.attached != 0, ClientID: uint64(i.client_id)})
		}
		return e
	})
	return out, err
}

// Unregistered describes the processes that opened the region
// unregistered and still run with it open: the latest UnregisteredMax such
// opens, in table order (display only: any client of the region writes the
// table).  A Region that Open could not register is among them (see
// Registered) until it is closed.
func (r *Region) Unregistered() ([]UnregisteredInfo, error) {
	var out []UnregisteredInfo
	err := r.each("unregistered", 0, func(c *C.fl_region, idx uint32) *Error {
		var i C.fl_unregistered_info
		e := call("unregistered", func() C.int { return C.fl_unregistered_info_get(c, C.uint32_t(idx), &i) })
		if e == nil {
			out = append(out, UnregisteredInfo{PID: uint32(i.pid), UID: uint32(i.uid),
				Reason: syscall.Errno(-i.reason), StartTime: uint64(i.start_time),
				Opened: unixTime(i.opened_unix_ns)})
		}
		return e
	})
	return out, err
}

// each calls get for index first, first+1, ... until ERANGE, skipping
// ENOENT (a slot without a published key, an empty client or
// unregistered-client entry).
func (r *Region) each(op string, first uint32, get func(*C.fl_region, uint32) *Error) error {
	c, err := r.handle(op)
	if err != nil {
		return err
	}
	defer r.mu.RUnlock()
	for idx := first; ; idx++ {
		e := get(c, idx)
		switch {
		case e == nil, e.Errno == syscall.ENOENT:
		case e.Errno == syscall.ERANGE:
			return nil
		default:
			return e
		}
	}
}

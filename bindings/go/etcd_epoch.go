package fencelock

/*
#include <stdlib.h>
#include <fencelock.h>
*/
import "C"

import "unsafe"

// EtcdEpoch reads the token epoch of the etcd region `region`
// (fl_etcd_epoch()), or with bump sets it to one more than the current one,
// or to atLeast if that is more (0: no floor): an operator's act after an
// etcd snapshot restore, before clients resume (docs/etcd.md, "Restoring a
// snapshot").  It returns the epoch found and the epoch now (equal without
// bump; 0 when the prefix has none yet).
func EtcdEpoch(region string, bump bool, atLeast uint64) (before, after uint64, err error) {
	if e := checkName("etcd epoch", "region", region); e != nil {
		return 0, 0, e
	}
	cs := C.CString(region)
	defer C.free(unsafe.Pointer(cs))
	var flags C.uint
	if bump {
		flags = C.FL_ETCD_EPOCH_BUMP
	}
	var res C.fl_etcd_epoch_result
	if e := call("etcd epoch", func() C.int {
		return C.fl_etcd_epoch(cs, flags, C.uint64_t(atLeast), &res)
	}); e != nil {
		return 0, 0, e
	}
	return uint64(res.before), uint64(res.after), nil
}

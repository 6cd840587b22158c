// Package cbench holds the C baselines of the Go binding's benchmarks: the
// same loops written in C, run in the same process against the same region
// handle, so the ratio shows what the binding adds.  Test-only: imported by
// bench_test.go, never by the binding.
package cbench

/*
#cgo pkg-config: fencelock
#include <stdlib.h>
#include <fencelock.h>

static int cb_acquire_release(fl_region *r, const char *key, long n)
{
    fl_lease l;
    for (long i = 0; i < n; i++) {
        int rc = fl_acquire(r, key, 1000000000u, 0, &l);
        if (rc == 0)
            rc = fl_release(r, &l);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int cb_commit8(fl_region *r, const char *key, const char *record, long n)
{
    fl_lease l;
    int rc = fl_acquire(r, key, 60000000000u, 0, &l);
    if (rc != 0)
        return rc;
    uint64_t v = 0;
    for (long i = 0; i < n && rc == 0; i++, v++)
        rc = fl_commit(r, &l, record, &v, sizeof v, 0, NULL);
    int rr = fl_release(r, &l);
    return rc ? rc : rr;
}
*/
import "C"

import "unsafe"

// AcquireRelease runs n fl_acquire (try, 1 s lease) + fl_release pairs.
// region is the binding's *C.fl_region.  Returns 0 or a negative errno.
func AcquireRelease(region unsafe.Pointer, key string, n int) int {
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	return int(C.cb_acquire_release((*C.fl_region)(region), k, C.long(n)))
}

// AcquireReleaseCgo is AcquireRelease's loop in Go, each fl_acquire and
// fl_release its own cgo call, with nothing of the binding around them:
// what any cgo binding pays for the two calls (the analogue of the Python
// benchmark's bare ctypes calls).
func AcquireReleaseCgo(region unsafe.Pointer, key string, n int) int {
	r := (*C.fl_region)(region)
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	l := (*C.fl_lease)(C.malloc(C.sizeof_fl_lease))
	defer C.free(unsafe.Pointer(l))
	for i := 0; i < n; i++ {
		rc := C.fl_acquire(r, k, 1000000000, 0, l)
		if rc == 0 {
			rc = C.fl_release(r, l)
		}
		if rc != 0 {
			return int(rc)
		}
	}
	return 0
}

// Commit8 acquires key, runs n 8-byte fl_commit calls to record, releases.
func Commit8(region unsafe.Pointer, key, record string, n int) int {
	k, rec := C.CString(key), C.CString(record)
	defer C.free(unsafe.Pointer(k))
	defer C.free(unsafe.Pointer(rec))
	return int(C.cb_commit8((*C.fl_region)(region), k, rec, C.long(n)))
}

package fencelock

import (
	"context"
	"encoding/binary"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/fencelock/fencelock/bindings/go/internal/cbench"
)

// The binding's cost: each benchmark times b.N operations through Go, then
// the same b.N operations from a C loop (internal/cbench) in the same
// process on the same region handle, and reports both and their ratio.
// AcquireRelease also times the two calls made by plain cgo from a Go loop
// (cgo-ns/op, and go/cgo: what the binding adds to cgo's own cost).
//
//	go test -run '^$' -bench . -benchtime 2000000x -count 5
//
// (with FENCELOCKD and PKG_CONFIG_PATH as for the tests).

func BenchmarkAcquireRelease(b *testing.B) {
	r := startDaemon(b).open(b)
	ctx := context.Background()
	b.ResetTimer()
	m := mallocs()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		l, err := r.Acquire(ctx, "bench", time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(); err != nil {
			b.Fatal(err)
		}
	}
	goNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	goAllocs := float64(mallocs()-m) / float64(b.N)
	start = time.Now()
	if rc := cbench.AcquireRelease(unsafe.Pointer(r.c), "bench", b.N); rc != 0 {
		b.Fatalf("C loop: %d", rc)
	}
	cNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	start = time.Now()
	if rc := cbench.AcquireReleaseCgo(unsafe.Pointer(r.c), "bench", b.N); rc != 0 {
		b.Fatalf("cgo loop: %d", rc)
	}
	cgoNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	report(b, goNs, cNs, goAllocs)
	b.ReportMetric(cgoNs, "cgo-ns/op")
	b.ReportMetric(goNs/cgoNs, "go/cgo")
}

func BenchmarkCommit8(b *testing.B) {
	r := startDaemon(b).open(b)
	l, err := r.Acquire(context.Background(), "bench", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	var v [8]byte
	b.ResetTimer()
	m := mallocs()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		binary.LittleEndian.PutUint64(v[:], uint64(i))
		if _, err := r.Commit(l, "rec", v[:], false); err != nil {
			b.Fatal(err)
		}
	}
	goNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	goAllocs := float64(mallocs()-m) / float64(b.N)
	l.Release()
	start = time.Now()
	if rc := cbench.Commit8(unsafe.Pointer(r.c), "bench", "rec", b.N); rc != 0 {
		b.Fatalf("C loop: %d", rc)
	}
	cNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	report(b, goNs, cNs, goAllocs)
}

// mallocs is the process's count of heap allocations so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// report gives the Go loop's time and allocations per operation (-benchmem's
// allocs/op count every loop of the benchmark, the cgo one's included), the
// C loop's time and the ratio.
func report(b *testing.B, goNs, cNs, goAllocs float64) {
	b.StopTimer()
	b.ReportMetric(goAllocs, "go-allocs/op")
	b.ReportMetric(0, "ns/op") // the wall time covers both loops: meaningless
	b.ReportMetric(goNs, "go-ns/op")
	b.ReportMetric(cNs, "c-ns/op")
	b.ReportMetric(goNs/cNs, "go/c")
}

package fencelock

import (
	"context"
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/fencelock/fencelock/bindings/go/internal/cbench"
)

// The binding's cost: each benchmark times b.N operations through Go, then
// the same b.N operations from a C loop (internal/cbench) in the same
// process on the same region handle, and reports both and their ratio.
//
//	go test -run '^$' -bench . -benchtime 2000000x -count 5
//
// (with FENCELOCKD and PKG_CONFIG_PATH as for the tests).

func BenchmarkAcquireRelease(b *testing.B) {
	r := startDaemon(b).open(b)
	ctx := context.Background()
	b.ResetTimer()
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
	start = time.Now()
	if rc := cbench.AcquireRelease(unsafe.Pointer(r.c), "bench", b.N); rc != 0 {
		b.Fatalf("C loop: %d", rc)
	}
	cNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	report(b, goNs, cNs)
}

func BenchmarkCommit8(b *testing.B) {
	r := startDaemon(b).open(b)
	l, err := r.Acquire(context.Background(), "bench", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	var v [8]byte
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		binary.LittleEndian.PutUint64(v[:], uint64(i))
		if _, err := r.Commit(l, "rec", v[:], false); err != nil {
			b.Fatal(err)
		}
	}
	goNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	l.Release()
	start = time.Now()
	if rc := cbench.Commit8(unsafe.Pointer(r.c), "bench", "rec", b.N); rc != 0 {
		b.Fatalf("C loop: %d", rc)
	}
	cNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	report(b, goNs, cNs)
}

func report(b *testing.B, goNs, cNs float64) {
	b.StopTimer()
	b.ReportMetric(0, "ns/op") // the wall time covers both loops: meaningless
	b.ReportMetric(goNs, "go-ns/op")
	b.ReportMetric(cNs, "c-ns/op")
	b.ReportMetric(goNs/cNs, "go/c")
}

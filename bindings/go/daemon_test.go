package fencelock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Each test starts its own fencelockd on a private region, with its --state
// file beside it.  The daemon's path comes from $FENCELOCKD (set by ctest;
// see CMakeLists.txt), else fencelockd on $PATH.

func fencelockdPath(t testing.TB) string {
	if p := os.Getenv("FENCELOCKD"); p != "" {
		return p
	}
	p, err := exec.LookPath("fencelockd")
	if err != nil {
		t.Fatal("set FENCELOCKD to the fencelockd to test with (ctest does; see bindings/go/CMakeLists.txt)")
	}
	return p
}

type daemon struct {
	region string
	cmd    *exec.Cmd
	exited chan error
	once   sync.Once
}

// startDaemon starts fencelockd on a new region and waits until Open
// succeeds (polling, no fixed sleep).  Cleanup stops it.  args are added
// to fencelockd's (a later option overrides an earlier one).
func startDaemon(t testing.TB, args ...string) *daemon {
	t.Helper()
	// A short directory: the socket path REGION.sock must fit sun_path,
	// and t.TempDir() embeds the test's name.
	dir, err := os.MkdirTemp("", "flgo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &daemon{region: filepath.Join(dir, "region")}
	log, err := os.Create(filepath.Join(dir, "fencelockd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	d.cmd = exec.Command(fencelockdPath(t), append([]string{"--region", d.region,
		"--state", filepath.Join(dir, "state"), "--locks", "64", "--records", "64", "--clients", "64"},
		args...)...)
	d.cmd.Stderr = log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	d.exited = exited
	go func() { exited <- d.cmd.Wait() }()
	t.Cleanup(d.stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := Open(d.region)
		if err == nil {
			registered := r.Registered()
			r.Close()
			if registered {
				return d
			}
		} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.EAGAIN) &&
			!errors.Is(err, syscall.EPROTO) {
			t.Fatalf("open %s: %v", d.region, err)
		}
		select {
		case err := <-exited:
			exited <- err // for stop
			b, _ := os.ReadFile(filepath.Join(dir, "fencelockd.log"))
			t.Fatalf("fencelockd exited: %v\n%s", err, b)
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("fencelockd did not become ready in 20 s")
		}
	}
}

// stop stops fencelockd (SIGTERM: a clean shutdown; the region stays) and
// waits for it to exit.  Idempotent.
func (d *daemon) stop() {
	d.once.Do(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
		}
	})
}

// open opens the daemon's region; Cleanup closes it.
func (d *daemon) open(t testing.TB) *Region {
	t.Helper()
	r, err := Open(d.region)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func mustAcquire(t testing.TB, r *Region, key string, lease time.Duration) *Lease {
	t.Helper()
	l, err := r.Acquire(context.Background(), key, lease)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Command outside is a program of another module that uses the binding as
// its users do (the ctest go_install, bindings/go/install_test.sh): built
// against an installed prefix through pkg-config, run without
// LD_LIBRARY_PATH.  It takes a lock of the region given, commits, reads
// the record back and prints what it did.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	fencelock "github.com/fencelock/fencelock/bindings/go"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: outside REGION")
		os.Exit(2)
	}
	r, err := open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := r.Acquire(ctx, "outside", 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := r.Commit(l, "outside-record", []byte("written from another module"), false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	data, fence, err := r.Read("outside-record")
	if err != nil || fence != l.Token {
		fmt.Fprintln(os.Stderr, "read:", err, fence, l.Token)
		os.Exit(1)
	}
	if err := l.Release(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("libfencelock %s: %q fenced by token %d\n", fencelock.Version(), data, fence)
}

// open waits for fencelockd, started just before, to serve region: until
// then Open says the file is missing or not ready, or opens it
// unregistered.
func open(region string) (*fencelock.Region, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := fencelock.Open(region)
		if err == nil && r.Registered() {
			return r, nil
		}
		if err == nil {
			r.Close()
		} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.EAGAIN) &&
			!errors.Is(err, syscall.EPROTO) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("fencelockd did not serve %s in 20 s (last: %v)", region, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

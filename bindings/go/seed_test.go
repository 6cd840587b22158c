package fencelock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The seed scenario with real processes and real signals (I1 I2 I4): a
// holder is stopped by SIGSTOP past its lease; another process takes the
// key over with a greater token and commits; the holder, continued,
// commits with its old token and is refused; the record holds the new
// holder's data.

const helperEnv = "FENCELOCK_GO_HELPER" // "holder" or "keepalive"

// helper re-executes this test binary as a holder process, talking over
// its stdin and stdout: one line each way.
type helper struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startHelper(t *testing.T, mode, region string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHolder$", "-test.v=false")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "FENCELOCK_GO_REGION="+region)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	return h
}

// expect reads the helper's next line that starts with prefix (go test
// may print its own lines) and returns the rest.
func (h *helper) expect(t *testing.T, prefix string) string {
	t.Helper()
	for {
		line, err := h.out.ReadString('\n')
		if err != nil {
			t.Fatalf("helper: waiting for %q: %v", prefix, err)
		}
		if strings.HasPrefix(line, "error ") {
			t.Fatalf("helper: %s", line)
		}
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(line, prefix))
		}
	}
}

func (h *helper) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// TestHelperHolder is the holder process; it does nothing in a normal run.
func TestHelperHolder(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("the holder process of TestSeedScenario and TestKeepAliveLost")
	}
	fail := func(format string, a ...interface{}) {
		fmt.Printf("error "+format+"\n", a...)
		os.Exit(1)
	}
	r, err := Open(os.Getenv("FENCELOCK_GO_REGION"))
	if err != nil {
		fail("open: %v", err)
	}
	in := bufio.NewReader(os.Stdin)
	switch mode {
	case "holder":
		l, err := r.Acquire(context.Background(), "seed", 200*time.Millisecond)
		if err != nil {
			fail("acquire: %v", err)
		}
		fmt.Printf("token %d\n", l.Token)
		in.ReadString('\n') // the parent stops us here, then says "commit"
		_, err = r.Commit(l, "seed-record", []byte("from the paused holder"), false)
		var se *StaleError
		switch {
		case err == nil:
			fmt.Println("committed")
		case errors.As(err, &se) && errors.Is(err, ErrStale) && errors.Is(err, ErrOwnershipLost):
			fmt.Printf("stale accepted=%d token=%d\n", se.Accepted, se.Token)
		default:
			fail("commit: %v", err)
		}
	case "keepalive":
		l, err := r.Acquire(context.Background(), "kept", 150*time.Millisecond)
		if err != nil {
			fail("acquire: %v", err)
		}
		lost := make(chan struct{})
		stop, err := l.KeepAlive(func() { close(lost) })
		if err != nil {
			fail("keepalive: %v", err)
		}
		fmt.Printf("token %d\n", l.Token)
		select {
		case <-lost:
			fmt.Println("lost")
		case <-time.After(20 * time.Second):
			fail("the loss was not reported")
		}
		stop()
		if err := l.Release(); !errors.Is(err, ErrOwnershipLost) {
			fail("release after the loss: %v", err)
		}
	}
	r.Close()
	os.Exit(0)
}

func TestSeedScenario(t *testing.T) { /* I1 I2 I4 */
	d := startDaemon(t)
	r := d.open(t)
	h := startHelper(t, "holder", d.region)
	var childToken uint64
	fmt.Sscan(h.expect(t, "token "), &childToken)
	if childToken == 0 {
		t.Fatal("no token from the holder")
	}
	// Stop the holder past its lease (200 ms); we wait for the takeover.
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := r.Acquire(ctx, "seed", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= childToken || !l.ExpiredPrevious {
		t.Fatalf("takeover: token %d after %d, expired previous %v", l.Token, childToken, l.ExpiredPrevious)
	}
	if _, err := r.Commit(l, "seed-record", []byte("from the new holder"), false); err != nil {
		t.Fatal(err)
	}
	h.cmd.Process.Signal(syscall.SIGCONT)
	h.send(t, "commit")
	got := h.expect(t, "stale ")
	if want := fmt.Sprintf("accepted=%d token=%d", l.Token, childToken); got != want {
		t.Fatalf("holder said %q, want %q", got, want)
	}
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	data, fence, err := r.Read("seed-record")
	if err != nil || string(data) != "from the new holder" || fence != l.Token {
		t.Fatalf("read: %q fence %d err %v", data, fence, err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}

// A keepalive in a process stopped past its lease reports the loss when it
// runs again (I4), through onLost in a goroutine.
func TestKeepAliveLost(t *testing.T) { /* I4 */
	d := startDaemon(t)
	r := d.open(t)
	h := startHelper(t, "keepalive", d.region)
	var childToken uint64
	fmt.Sscan(h.expect(t, "token "), &childToken)
	h.cmd.Process.Signal(syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := r.Acquire(ctx, "kept", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= childToken {
		t.Fatalf("token %d after %d", l.Token, childToken)
	}
	h.cmd.Process.Signal(syscall.SIGCONT)
	h.expect(t, "lost")
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	l.Release()
}

package fencelock

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The binding under misuse (issue 26): what a new user gets wrong must be
// refused or cleaned up, never accepted or leaked.

// Every error names its errno: a call on a closed Region is EBADF, which
// the C library's table does not know (issue 26, defect 10).
func TestErrorText(t *testing.T) {
	r := startDaemon(t).open(t)
	l := mustAcquire(t, r, "k", time.Minute)
	if _, err := l.KeepAlive(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.KeepAlive(nil); err == nil ||
		err.Error() != "fencelock: keepalive: the lease already has a keepalive (EALREADY)" {
		t.Errorf("second keepalive: %v", err)
	}
	r.Close()
	_, err := r.Acquire(context.Background(), "k", time.Second)
	if err == nil || err.Error() != "fencelock: acquire: region is closed (EBADF)" {
		t.Errorf("acquire on a closed Region: %v", err)
	}
	if _, err := r.Commit(l, "rec", nil, false); err == nil ||
		err.Error() != "fencelock: commit: region is closed (EBADF)" {
		t.Errorf("commit on a closed Region: %v", err)
	}
	if err := l.Renew(time.Second); err == nil || err.Error() != "fencelock: renew: region is closed (EBADF)" {
		t.Errorf("renew on a closed Region: %v", err)
	}
	// The C library's errors keep its names; any other errno is named by
	// number, never "E?".
	for _, c := range []struct {
		e    Error
		want string
	}{
		{Error{Errno: syscall.ESTALE, Op: "x"}, "fencelock: x: " +
			"fencing token is stale: ownership lost (do not retry with this token) (ESTALE)"},
		{Error{Errno: syscall.EBADF, Op: "x"}, "fencelock: x: bad file descriptor (EBADF)"},
		{Error{Errno: syscall.Errno(200), Op: "x", Message: "m"}, "fencelock: x: m (errno 200)"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%#v: %q, want %q", c.e, got, c.want)
		}
	}
}

// `go doc` shows every exported constant's value: each is written out as a
// literal, not an expression of C.FL_* (issue 26, defect 12).
func TestGoDocShowsConstantValues(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goTool, "doc", "-all", ".")
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go doc -all: %v\n%s", err, out)
	}
	doc := string(out)
	start, end := strings.Index(doc, "\nCONSTANTS\n"), strings.Index(doc, "\nVARIABLES\n")
	if start < 0 || end < start {
		t.Fatalf("no CONSTANTS section in go doc's output:\n%s", doc)
	}
	consts := doc[start:end]
	spec := regexp.MustCompile(`(?m)^\t([A-Z]\w*)(?: +\w+)? += +(.*)$`)
	literal := regexp.MustCompile(`^(\d+|"[^"]*")( |$)`)
	seen := map[string]bool{}
	for _, m := range spec.FindAllStringSubmatch(consts, -1) {
		seen[m[1]] = true
		if !literal.MatchString(m[2]) {
			t.Errorf("go doc shows %s = %s: not a value", m[1], m[2])
		}
	}
	for _, name := range []string{"KeyMax", "TokenMax", "TokenEpochShift", "RegionEnv", "UnregisteredMax",
		"LockFree", "LockHeld", "LockExpired", "RunNever", "RunStarted", "RunClean",
		"OpCommit", "OpStrictCommit", "OpRenew", "OpRelease"} {
		if !seen[name] {
			t.Errorf("go doc does not show constant %s", name)
		}
	}
	for _, want := range []string{"KeyMax = 127", "TokenMax uint64 = 9223372036854775807",
		"LockExpired int = 2", "OpRelease      uint32 = 4"} {
		if !strings.Contains(consts, want) {
			t.Errorf("go doc lacks %q:\n%s", want, consts)
		}
	}
}

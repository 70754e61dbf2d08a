package tests

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"refuel/pkg/devserver"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// refuelBinaries builds bin/worker and bin/starter once per test binary,
// into a directory of this user's and this checkout's that later runs
// build over again: two checkouts tested at once on one machine must not
// run each other's binaries.
func refuelBinaries(t *testing.T) (worker, starter string) {
	t.Helper()
	buildOnce.Do(func() {
		repo, _ := filepath.Abs("..")
		h := fnv.New32a()
		h.Write([]byte(repo))
		binDir = filepath.Join(os.TempDir(), fmt.Sprintf("refuel-e2e-bin-%d-%08x", os.Getuid(), h.Sum32()))
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "./worker", "./starter")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./worker ./starter: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "worker"), filepath.Join(binDir, "starter")
}

// cliResult is what one run of a refuel binary printed and its exit status.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs a binary to its end in dir, without the TEMPORAL_*
// environment of whoever runs the tests.
func runCLI(t *testing.T, dir, bin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
	}
	return cliResult{out.String(), errs.String(), code}
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TEMPORAL_") && !strings.HasPrefix(kv, "REFUEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// freeAddr is a loopback address no one listens on now, for a process the
// test starts to bind. Its port is outside the ephemeral range, so no
// connection made meanwhile is given it: not before the process binds it,
// nor while a process the test stops is down before it binds it again.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := devserver.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

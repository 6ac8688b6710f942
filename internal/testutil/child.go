package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// InChild runs scenario in a child process of the test binary, running
// only the calling test, and fails t with the start of the child's output
// if the child fails or crashes. It is for the promise that something
// (a panic in user code on a producer's goroutine) does not kill the
// program: a crash would take the whole test binary down otherwise. In the
// child (the environment variable env is "1") it runs scenario itself.
func InChild(t *testing.T, env string, scenario func(t *testing.T)) {
	t.Helper()
	if os.Getenv(env) == "1" {
		scenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 2000 {
			out = out[:2000]
		}
		t.Fatalf("the child process failed or crashed (%v):\n%s", err, out)
	}
}

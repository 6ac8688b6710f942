package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/testutil"
)

// TestMain lets the tests run the command itself: the test binary re-executed
// with runMainEnv set is the testbroker command, with its own arguments.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const runMainEnv = "SAMSA_TESTBROKER_RUN_MAIN"

func command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	return cmd
}

// TestHelpAndBadFlags: -h prints every flag and exits 0; a bad combination
// exits 1 with the reason.
func TestHelpAndBadFlags(t *testing.T) {
	var stderr bytes.Buffer
	cmd := command("-h")
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "-h exits 0")
	for _, f := range []string{"-queued-max-bytes", "-socket-request-max-bytes", "-mutation-rate",
		"-mutation-burst", "-mutation-window", "-mutation-samples", "-produce-byte-rate", "-txn-max-timeout", "-txn-marker-delay", "-v"} {
		assert.Contains(t, stderr.String(), f)
	}

	stderr.Reset()
	cmd = command("-queued-max-bytes", "1000", "-socket-request-max-bytes", "2000")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, stderr.String(), "QueuedMaxBytes 1000 must be larger than SocketRequestMaxBytes 2000")
}

// TestFlagsReachTheBroker: -v logs each connection, -mutation-rate and
// -mutation-samples set KIP-599's bucket (R = 1, B = 100: of three
// 60-partition topics the third is refused), -socket-request-max-bytes
// closes a connection sending more.
func TestFlagsReachTheBroker(t *testing.T) {
	var stderr testutil.SyncBuffer
	cmd := command("-v", "-brokers", "1", "-queued-max-bytes", "2097152", "-socket-request-max-bytes", "1048576",
		"-mutation-rate", "1", "-mutation-samples", "100", "-mutation-window", "1s")
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	addr = strings.TrimSpace(addr)

	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	for _, name := range []string{"a", "b", "c"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 60, 1
		req.Topics = append(req.Topics, rt)
	}
	resp := roundTrip(t, nc, req).(*kmsg.CreateTopicsResponse)
	require.Len(t, resp.Topics, 3)
	assert.Equal(t, []int16{0, 0, 89}, []int16{resp.Topics[0].ErrorCode, resp.Topics[1].ErrorCode, resp.Topics[2].ErrorCode})
	assert.InDelta(t, 20000, resp.ThrottleMillis, 100, "-K/R = 20 s (the real clock runs)")
	_ = nc.Close()

	big, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	_, err = big.Write(binary.BigEndian.AppendUint32(nil, 1048577))
	require.NoError(t, err)
	_ = big.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = big.Read(make([]byte, 1))
	assert.Error(t, err, "closed: larger than -socket-request-max-bytes")

	// (The first connection is muted for the 20 s throttle, KIP-219: the
	// broker sees its end only then.)
	require.Eventually(t, func() bool {
		return strings.Contains(stderr.String(), "connection closed")
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 2, strings.Count(stderr.String(), "connection opened"))
	assert.Contains(t, stderr.String(), "bad request size")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "SIGTERM exits 0")
}

func roundTrip(t *testing.T, nc net.Conn, req kmsg.Request) kmsg.Response {
	t.Helper()
	_, err := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("flags")).AppendRequest(nil, req, 1))
	require.NoError(t, err)
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	_, err = io.ReadFull(nc, size[:])
	require.NoError(t, err)
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(nc, buf)
	require.NoError(t, err)
	resp := req.ResponseKind()
	body := buf[4:]
	if resp.IsFlexible() {
		body = body[1:]
	}
	require.NoError(t, resp.ReadFrom(body))
	return resp
}

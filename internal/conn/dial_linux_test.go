package conn

import (
	"context"
	"crypto/tls"
	"net"
	"syscall"
	"testing"
)

// sockBuf reads SO_SNDBUF or SO_RCVBUF of c.
func sockBuf(t *testing.T, c *net.TCPConn, opt int) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var gerr error
	if err := raw.Control(func(fd uintptr) { n, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return n
}

// send.buffer.bytes and receive.buffer.bytes reach the socket (Linux
// reports twice the size set, its bookkeeping included); 0 leaves the
// operating system's default; a *tls.Conn from the Dialer gets them on the
// socket under it (NetConn), a wrapper that hides its socket does not.
func TestSocketBuffersApplied(t *testing.T) {
	b := newFakeBroker(t, metadataEcho)
	fresh := func() *net.TCPConn {
		c, err := net.Dial("tcp", b.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c.(*net.TCPConn)
	}
	probe := fresh()
	defSnd, defRcv := sockBuf(t, probe, syscall.SO_SNDBUF), sockBuf(t, probe, syscall.SO_RCVBUF)

	cases := []struct {
		name             string
		snd, rcv         int
		wrap             string
		wantSnd, wantRcv int
	}{
		{"both set", 65536, 49152, "", 2 * 65536, 2 * 49152},
		{"send only", 40960, 0, "", 2 * 40960, defRcv},
		{"OS default", 0, -1, "", defSnd, defRcv},
		{"under TLS", 32768, 36864, "tls", 2 * 32768, 2 * 36864},
		{"a wrapper without NetConn is left as it is", 32768, 36864, "opaque", defSnd, defRcv},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tcp := fresh()
			var nc net.Conn = tcp
			switch tc.wrap {
			case "tls":
				nc = tls.Client(tcp, &tls.Config{ServerName: "x"})
			case "opaque":
				nc = struct{ net.Conn }{tcp}
			}
			if err := setBuffers(nc, &Config{SendBufferBytes: tc.snd, ReceiveBufferBytes: tc.rcv}); err != nil {
				t.Fatal(err)
			}
			if got := sockBuf(t, tcp, syscall.SO_SNDBUF); got != tc.wantSnd {
				t.Errorf("SO_SNDBUF %d, want %d", got, tc.wantSnd)
			}
			if got := sockBuf(t, tcp, syscall.SO_RCVBUF); got != tc.wantRcv {
				t.Errorf("SO_RCVBUF %d, want %d", got, tc.wantRcv)
			}
		})
	}

	// Through Dial, with the default dialing: the connection's socket.
	c, err := Dial(context.Background(), b.addr(), Config{SendBufferBytes: 65536, ReceiveBufferBytes: 65536})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tcp := c.nc.(*net.TCPConn)
	if snd, rcv := sockBuf(t, tcp, syscall.SO_SNDBUF), sockBuf(t, tcp, syscall.SO_RCVBUF); snd != 2*65536 || rcv != 2*65536 {
		t.Fatalf("Dial's socket has SO_SNDBUF %d, SO_RCVBUF %d; want %d each", snd, rcv, 2*65536)
	}
}

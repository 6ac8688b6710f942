package testutil

import (
	"net"
	"testing"
)

// RefusedAddr returns an address on 127.0.0.1 that nothing listens on, so
// that a connection to it is refused: a port the kernel gave a listener,
// which is then closed.
func RefusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

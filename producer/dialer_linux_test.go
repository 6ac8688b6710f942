package producer

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/internal/testbroker"
)

// send.buffer.bytes and receive.buffer.bytes reach the socket of every
// connection (read back with getsockopt; Linux reports twice the size set,
// its bookkeeping included).
func TestSocketBufferPropertiesReachTheSockets(t *testing.T) {
	c := newCluster(t, testbroker.Config{Brokers: 1})
	require.NoError(t, c.CreateTopic("buffers", 1))
	cfg, err := ConfigFromProperties(map[string]string{"send.buffer.bytes": "65536", "receive.buffer.bytes": "49152"})
	require.NoError(t, err)
	d := &trackingDialer{}
	cfg.Dialer = d.dial
	p := newProducer(t, c, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = p.Send(ctx, &Record{Topic: "buffers", Value: []byte("v")}).Wait(ctx)
	require.NoError(t, err)

	d.mu.Lock()
	conns := append([]net.Conn(nil), d.conns...)
	d.mu.Unlock()
	require.GreaterOrEqual(t, len(conns), 2, "metadata and Produce connections")
	checked := 0
	for i, nc := range conns {
		raw, err := nc.(*net.TCPConn).SyscallConn()
		require.NoError(t, err)
		var snd, rcv int
		var serr, rerr error
		err = raw.Control(func(fd uintptr) {
			snd, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
			rcv, rerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		})
		if errors.Is(err, net.ErrClosed) {
			continue // a connection the producer has closed since (a bootstrap one): nothing to read
		}
		require.NoError(t, err)
		checked++
		require.NoError(t, serr)
		require.NoError(t, rerr)
		assert.Equal(t, 2*65536, snd, "connection %d: SO_SNDBUF", i)
		assert.Equal(t, 2*49152, rcv, "connection %d: SO_RCVBUF", i)
	}
	assert.GreaterOrEqual(t, checked, 1, "no connection left open to read")
}

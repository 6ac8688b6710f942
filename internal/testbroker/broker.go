package testbroker

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// broker is one broker of a cluster: a listener, its accept goroutine and
// its connections. It can be stopped and restarted on the same port.
type broker struct {
	c    *Cluster
	id   int32
	host string

	mu    sync.Mutex
	port  int32        // fixed at the first listen
	ln    net.Listener // nil while stopped
	conns map[*conn]struct{}

	requests [maxAPIKey + 1]atomic.Int64 // handled requests by key

	listeners brokerListeners // beyond the first (security.go)

	// batches, records and bytes count the batches this broker appended,
	// their records and their length as produced, header included
	// (duplicates not counted).
	batches, records, bytes atomic.Int64
	// idleClosed counts the connections closed for ConnectionsMaxIdle.
	idleClosed atomic.Int64
}

// listen starts the broker on port (0: a random one), and its accept
// goroutine.
func (b *broker) listen(port int) error {
	ln, err := listenTCP(b.host, port)
	if err != nil {
		return err
	}
	ln = b.wrapListener(0, ln)
	b.mu.Lock()
	b.ln = ln
	b.port = int32(ln.Addr().(*net.TCPAddr).Port)
	b.mu.Unlock()
	b.c.wg.Add(1)
	go b.accept(ln, 0)
	return b.listenExtra()
}

// listenTCP listens on host:port (any free port for 0). A given port,
// free until the broker stopped, may be held for a moment by another
// process's ephemeral port or by a client's connection to itself while it
// redials: it is tried again for up to 2 s.
func listenTCP(host string, port int) (net.Listener, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	for try := 0; port != 0 && errors.Is(err, syscall.EADDRINUSE) && try < 40; try++ {
		time.Sleep(50 * time.Millisecond)
		ln, err = net.Listen("tcp", addr)
	}
	return ln, err
}

func (b *broker) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ln != nil
}

func (b *broker) addr() (host string, port int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.host, b.port
}

// stop closes the listener and every connection; their goroutines end on
// their own (Cluster.wg tracks them).
func (b *broker) stop() {
	b.mu.Lock()
	ln := b.ln
	b.ln = nil
	conns := make([]*conn, 0, len(b.conns))
	for cn := range b.conns {
		conns = append(conns, cn)
	}
	b.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	b.stopExtra()
	for _, cn := range conns {
		cn.close()
	}
}

// accept runs until ln, the broker's listener number listener (0 the
// first, the others brokerListeners.extra), is closed, starting one
// goroutine per connection.
func (b *broker) accept(ln net.Listener, listener int) {
	defer b.c.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		cn := newConn(b, nc)
		cn.sec.listener = listener
		b.mu.Lock()
		if b.ln == nil || listener == 0 && b.ln != ln { // stopped (or restarted) meanwhile
			b.mu.Unlock()
			_ = nc.Close()
			cn.cancel()
			continue
		}
		b.conns[cn] = struct{}{}
		b.mu.Unlock()
		b.c.wg.Add(1)
		go cn.serve()
	}
}

func (b *broker) forget(cn *conn) {
	b.mu.Lock()
	delete(b.conns, cn)
	b.mu.Unlock()
}

// newConn wraps an accepted connection.
func newConn(b *broker, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &conn{
		b:      b,
		c:      b.c,
		nc:     nc,
		ctx:    ctx,
		cancel: cancel,
	}
}

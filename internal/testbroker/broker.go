package testbroker

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
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
}

// listen starts the broker on port (0: a random one), and its accept
// goroutine.
func (b *broker) listen(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(b.host, strconv.Itoa(port)))
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

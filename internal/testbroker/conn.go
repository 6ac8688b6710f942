package testbroker

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one client connection. A single goroutine (serve) reads a
// request, handles it and writes its response before reading the next one,
// the way a Kafka broker mutes a channel while one of its requests is in
// flight: responses keep request order, and a connection holds the memory
// of at most one request. Clients may still pipeline: their next requests
// wait in the socket buffers.
type conn struct {
	b  *broker
	c  *Cluster
	nc net.Conn

	ctx       context.Context // ends when the connection closes
	cancel    context.CancelFunc
	closeOnce sync.Once

	// Scratch state of the serve goroutine, reused across requests.
	sizeBuf     [4]byte
	scratch     []byte // request memory when QueuedMaxBytes is off
	out         []byte // response encoding buffer
	clientID    string
	produceReq  kmsg.ProduceRequest
	produceResp kmsg.ProduceResponse
	mutedUntil  time.Time // KIP-219: no read before this time
	timer       *time.Timer
	hdr         reqHeader // the request being handled
	sec         connSecurity
}

// forgetRequest drops every reference the connection's reusable Produce
// structs hold into the request buffer, before the buffer is released:
// UnsafeReadFrom makes the request's topic names and records alias it, and
// the response copies the names. Kept, they would pin the last request of
// every idle or muted connection in memory, outside queued.max.bytes, and
// break the pool's rule that a released buffer is not touched again.
// Clearing the request's topics loses nothing: kmsg zeroes reused elements
// on the next decode anyway. The response keeps its slices (the hot path
// allocates nothing) without the names.
func (cn *conn) forgetRequest() {
	req := &cn.produceReq
	clear(req.Topics)
	req.Topics = req.Topics[:0]
	req.TransactionID = nil
	req.UnknownTags = kmsg.Tags{}
	resp := &cn.produceResp
	for i := range resp.Topics {
		resp.Topics[i].Topic = ""
	}
}

// reqHeader is a parsed request header (v1 or v2).
type reqHeader struct {
	key, version int16
	correlation  int32
	size         int // whole request, header included
}

// close closes the socket and ends every wait of the connection.
func (cn *conn) close() {
	cn.closeOnce.Do(func() {
		cn.cancel()
		_ = cn.nc.Close()
	})
}

// serve is the connection's goroutine: read, handle, respond, repeat.
func (cn *conn) serve() {
	defer cn.c.wg.Done()
	defer cn.b.forget(cn)
	defer cn.close()
	remote := cn.nc.RemoteAddr().String()
	cn.c.log.Debug("testbroker: connection opened", "broker", cn.b.id, "remote", remote)
	defer func() {
		cn.c.log.Debug("testbroker: connection closed", "broker", cn.b.id, "remote", remote,
			"client_id", cn.clientID, "user", cn.quotaUser())
	}()
	for {
		if err := cn.waitMuted(); err != nil {
			return
		}
		// KIP-72: request bytes are read out of the socket only into
		// pool memory. The size prefix is read alone, with no buffered
		// read-ahead: a muted connection leaves the rest of its request in
		// the kernel's socket buffer, where it costs the heap nothing.
		// connections.max.idle.ms: the wait for the next request is
		// the connection's idle time (one request at a time). The
		// deadline is not cleared once the size has come (a second
		// call per request): only the body's read can meet it, which
		// then resumes without one (readBody).
		idle := cn.c.cfg.ConnectionsMaxIdle
		if idle > 0 {
			_ = cn.nc.SetReadDeadline(time.Now().Add(idle))
		}
		if _, err := io.ReadFull(cn.nc, cn.sizeBuf[:]); err != nil {
			if idle > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				cn.b.idleClosed.Add(1)
				cn.c.log.Debug("testbroker: closing idle connection", "broker", cn.b.id, "remote", remote, "connections_max_idle", idle)
				return
			}
			cn.logReadError(err)
			return
		}
		size := int32(binary.BigEndian.Uint32(cn.sizeBuf[:]))
		if size < minRequestSize || size > cn.c.cfg.SocketRequestMaxBytes {
			cn.c.log.Warn("testbroker: closing connection: bad request size",
				"broker", cn.b.id, "remote", cn.nc.RemoteAddr().String(), "size", size,
				"socket_request_max_bytes", cn.c.cfg.SocketRequestMaxBytes)
			return
		}
		buf, err := cn.c.mem.acquire(cn.ctx, int(size), &cn.scratch)
		if err != nil {
			return // closed while muted
		}
		if err = cn.readBody(buf); err != nil {
			cn.c.mem.release(buf, &cn.scratch)
			cn.logReadError(err)
			return
		}
		err = cn.handle(buf)
		cn.forgetRequest()
		cn.c.mem.release(buf, &cn.scratch)
		if err != nil {
			if !errors.Is(err, errDropped) && !errors.Is(err, errNoResponse) && cn.ctx.Err() == nil {
				cn.c.log.Warn("testbroker: closing connection", "broker", cn.b.id,
					"remote", cn.nc.RemoteAddr().String(), "err", err)
			}
			return
		}
	}
}

// readBody reads a request's body into buf. The idle deadline set for its
// size may expire meanwhile (a body that arrives slowly): the connection is
// not idle then, and the read goes on without a deadline. A deadline error
// leaves a net.Conn, and a tls.Conn's reads, usable.
func (cn *conn) readBody(buf []byte) error {
	n, err := io.ReadFull(cn.nc, buf)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		if err = cn.nc.SetReadDeadline(time.Time{}); err == nil {
			_, err = io.ReadFull(cn.nc, buf[n:])
		}
	}
	return err
}

func (cn *conn) logReadError(err error) {
	alertNonTLSClient(err)
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || cn.ctx.Err() != nil {
		return
	}
	cn.c.log.Debug("testbroker: connection read failed", "broker", cn.b.id, "err", err)
}

// minRequestSize is the smallest request header: key, version, correlation
// id and a client id length.
const minRequestSize = 10

var (
	errDropped    = errors.New("connection dropped by an interceptor")
	errNoResponse = errors.New("acks=0 produce failed: closing the connection as Kafka does")
)

// parseHeader reads the request header of buf, up to the body. It returns
// the API (nil for an unknown key) and the body.
func (cn *conn) parseHeader(buf []byte) (h reqHeader, body []byte, err error) {
	if len(buf) < minRequestSize {
		return h, nil, fmt.Errorf("request of %d bytes is shorter than a header", len(buf))
	}
	be := binary.BigEndian
	h.key = int16(be.Uint16(buf))
	h.version = int16(be.Uint16(buf[2:]))
	h.correlation = int32(be.Uint32(buf[4:]))
	h.size = len(buf) + 4
	idLen := int(int16(be.Uint16(buf[8:])))
	rest := buf[10:]
	if idLen > 0 {
		if idLen > len(rest) {
			return h, nil, fmt.Errorf("client id of %d bytes overruns the request", idLen)
		}
		if id := rest[:idLen]; string(id) != cn.clientID {
			cn.clientID = string(id)
		}
		rest = rest[idLen:]
	} else if cn.clientID != "" {
		cn.clientID = ""
	}
	return h, rest, nil
}

// skipTags skips the tagged fields that end a flexible (v2) request header.
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errors.New("truncated header tags")
	}
	b = b[l:]
	for range n {
		_, l := binary.Uvarint(b) // tag
		if l <= 0 {
			return nil, errors.New("truncated header tag")
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || size > uint64(len(b)-l) {
			return nil, errors.New("truncated header tag value")
		}
		b = b[l+int(size):]
	}
	return b, nil
}

// handle decodes one request, runs it through the interceptors and its
// handler, and writes the response. A returned error closes the connection.
func (cn *conn) handle(buf []byte) error {
	hdr, body, err := cn.parseHeader(buf)
	if err != nil {
		return err
	}
	if err := cn.checkAuth(hdr.key); err != nil {
		return err
	}
	cn.hdr = hdr // on the conn: a pointer to a local would escape
	h := &cn.hdr
	if h.key >= 0 && h.key <= maxAPIKey {
		cn.b.requests[h.key].Add(1)
	}
	a := lookupAPI(h.key)
	if a == nil || (a.enabled != nil && !a.enabled(cn.c)) {
		return fmt.Errorf("unsupported API key %d", h.key)
	}
	if h.version < a.min || h.version > a.max {
		if h.key == apiVersionsKey {
			// The v0 fallback: answer v0 with UNSUPPORTED_VERSION and the
			// supported versions, so the client retries with one it and
			// we know.
			return cn.write(h, unsupportedAPIVersions(cn.c), false)
		}
		return fmt.Errorf("%s v%d is not supported (v%d to v%d are)", kmsg.NameForKey(h.key), h.version, a.min, a.max)
	}
	req := a.request(cn)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			return fmt.Errorf("%s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
		}
	}
	if u, ok := req.(kmsg.UnsafeReadFrom); ok && h.key == produceKey {
		// The strings alias buf, which outlives the response.
		err = u.UnsafeReadFrom(body)
	} else {
		err = req.ReadFrom(body)
	}
	if err != nil {
		return fmt.Errorf("decoding %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return cn.process(h, a, req)
}

// result is what a handler produces.
type result struct {
	resp kmsg.Response // nil: no response (acks=0)
	// throttle is applied KIP-219 style (see respond).
	throttle time.Duration
	// closeConn closes the connection after the response (if any).
	closeConn bool
}

// process runs the interceptors around the handler and responds.
func (cn *conn) process(h *reqHeader, a *api, req kmsg.Request) error {
	var r result
	var icptThrottle time.Duration
	before, after := cn.c.icpt.pick(cn.b.id, req)
	handled := false
	if before != nil {
		if err := cn.applyWaits(before); err != nil {
			return err
		}
		if before.Drop {
			return errDropped
		}
		icptThrottle = before.Throttle
		if before.ErrorCode != 0 {
			r = result{resp: errorResponse(req, before.ErrorCode)}
			handled = true
			if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
				r = result{closeConn: true}
			}
		}
	}
	if !handled {
		r = a.handle(cn, h, req)
	}
	if after != nil {
		if err := cn.applyWaits(after); err != nil {
			return err
		}
		if after.Drop {
			return errDropped
		}
		icptThrottle = max(icptThrottle, after.Throttle)
		if after.Rewrite != nil && r.resp != nil {
			after.Rewrite(r.resp)
		}
		if after.ErrorCode != 0 {
			if r.resp != nil {
				setErrorCode(r.resp, after.ErrorCode)
			} else {
				r.closeConn = true // acks=0: Kafka closes on error
			}
		}
	}
	if r.resp == nil {
		if r.closeConn {
			return errNoResponse
		}
		return nil
	}
	if err := cn.respond(h, r.resp, max(r.throttle, icptThrottle)); err != nil {
		return err
	}
	if r.closeConn {
		return errNoResponse
	}
	return nil
}

// applyWaits performs an interception's Delay and Stall.
func (cn *conn) applyWaits(i *interception) error {
	if i.Delay > 0 {
		if err := cn.sleep(i.Delay); err != nil {
			return err
		}
	}
	if i.Stall {
		select {
		case <-i.released:
		case <-cn.ctx.Done():
			return cn.ctx.Err()
		}
	}
	return nil
}

// sleep waits d unless the connection closes first.
func (cn *conn) sleep(d time.Duration) error {
	if cn.timer == nil {
		cn.timer = time.NewTimer(d)
	} else {
		cn.timer.Reset(d)
	}
	select {
	case <-cn.timer.C:
		return nil
	case <-cn.ctx.Done():
		cn.timer.Stop()
		return cn.ctx.Err()
	}
}

// waitMuted keeps the connection from reading while a KIP-219 throttle runs.
func (cn *conn) waitMuted() error {
	if cn.mutedUntil.IsZero() {
		return nil
	}
	d := time.Until(cn.mutedUntil)
	cn.mutedUntil = time.Time{}
	if d <= 0 {
		return nil
	}
	return cn.sleep(d)
}

// respond writes resp, applying a throttle the way Kafka does for the
// response's version: after the response (KIP-219: the throttle time goes
// out at once and the connection is not read until it passes), or before it
// (older versions: the response itself is delayed).
func (cn *conn) respond(h *reqHeader, resp kmsg.Response, throttle time.Duration) error {
	if throttle > 0 {
		ms := int32((throttle + time.Millisecond - 1) / time.Millisecond)
		if st, ok := resp.(kmsg.SetThrottleResponse); ok {
			st.SetThrottle(ms)
		}
		afterResponse := false
		if tr, ok := resp.(kmsg.ThrottleResponse); ok {
			_, afterResponse = tr.Throttle()
		}
		if afterResponse {
			cn.mutedUntil = time.Now().Add(throttle)
		} else if err := cn.sleep(throttle); err != nil {
			return err
		}
	}
	return cn.write(h, resp, resp.IsFlexible())
}

// write encodes and writes one response. ApiVersions responses always use
// header v0, even when flexible, so that any client can read them.
func (cn *conn) write(h *reqHeader, resp kmsg.Response, flexible bool) error {
	out := append(cn.out[:0], 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(h.correlation))
	if flexible && h.key != apiVersionsKey {
		out = append(out, 0) // no header tags
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	_, err := cn.nc.Write(out)
	if cap(out) > maxKeptResponse {
		out = nil // a big Fetch response is not kept by an idle connection
	}
	cn.out = out
	return err
}

// unexpectedMessageAlert is the TLS record a Kafka broker's SSLEngine writes
// to a client whose first bytes are not a TLS handshake (a plaintext client
// on an SSL listener): a fatal unexpected_message alert, record version
// TLS 1.2. Read as a response size, its first 4 bytes say 352 518 912.
var unexpectedMessageAlert = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x0a}

// alertNonTLSClient answers, as Kafka does, a client that does not speak
// TLS on a TLS listener with unexpectedMessageAlert: crypto/tls only closes
// the connection, and hands the raw connection over in the error for such
// an answer. The rest of the client's request is read (up to 64 KiB, for a
// second) before the connection closes: closed with unread bytes, it would
// be reset, and the client could lose the alert.
func alertNonTLSClient(err error) {
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) || rh.Conn == nil {
		return
	}
	_ = rh.Conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := rh.Conn.Write(unexpectedMessageAlert); err != nil {
		return
	}
	if tc, ok := rh.Conn.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(rh.Conn, 64<<10))
}

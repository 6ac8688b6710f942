package conn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBroker is a minimal Kafka listener for connection tests: it decodes
// request headers and bodies with kmsg and answers through handle.
type fakeBroker struct {
	t  testing.TB
	ln net.Listener

	// apiKeys is what ApiVersions returns.
	apiKeys []kmsg.ApiVersionsResponseApiKey
	// maxAPIVersions, if >= 0, makes ApiVersions requests above it fail
	// with UNSUPPORTED_VERSION in a v0 body (KIP-511).
	maxAPIVersions int16
	// handle answers one request; a nil response sends nothing back.
	handle func(h reqHeader, req kmsg.Request) kmsg.Response
	// raw, if set, answers every request but ApiVersions instead of
	// handle, writing what it likes on c; false closes the connection.
	raw func(c net.Conn, h reqHeader, req kmsg.Request) bool

	mu    sync.Mutex
	seen  []seenReq
	conns []net.Conn
	wg    sync.WaitGroup
}

type reqHeader struct {
	key, version int16
	corr         int32
	clientID     string
}

type seenReq struct {
	h   reqHeader
	req kmsg.Request
	at  time.Time
}

func defaultAPIKeys() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MinVersion: 3, MaxVersion: 11},
		{ApiKey: 3, MinVersion: 0, MaxVersion: 12},
		{ApiKey: 18, MinVersion: 0, MaxVersion: 4},
		{ApiKey: 22, MinVersion: 0, MaxVersion: 5},
	}
}

func newFakeBroker(t testing.TB, handle func(reqHeader, kmsg.Request) kmsg.Response) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{t: t, ln: ln, apiKeys: defaultAPIKeys(), maxAPIVersions: -1, handle: handle}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *fakeBroker) addr() string { return b.ln.Addr().String() }

func (b *fakeBroker) close() {
	_ = b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// dropConns closes every server-side connection.
func (b *fakeBroker) dropConns() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Close()
	}
}

func (b *fakeBroker) requests() []seenReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]seenReq(nil), b.seen...)
}

func (b *fakeBroker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c)
	}
}

func (b *fakeBroker) serve(c net.Conn) {
	defer b.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		frame, err := readFrame(br)
		if err != nil {
			return
		}
		h, req, err := decodeRequest(frame)
		if err != nil {
			b.t.Errorf("fake broker: %v", err)
			return
		}
		b.mu.Lock()
		b.seen = append(b.seen, seenReq{h, req, time.Now()})
		b.mu.Unlock()

		if b.raw != nil && h.key != 18 {
			if !b.raw(c, h, req) {
				return
			}
			continue
		}
		var resp kmsg.Response
		if h.key == 18 {
			resp = b.apiVersions(h)
		} else if b.handle != nil {
			resp = b.handle(h, req)
		}
		if resp == nil {
			continue
		}
		if _, err := c.Write(encodeResponse(h, resp)); err != nil {
			return
		}
	}
}

func (b *fakeBroker) apiVersions(h reqHeader) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	if b.maxAPIVersions >= 0 && h.version > b.maxAPIVersions {
		resp.Version = 0
		resp.ErrorCode = 35
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: b.maxAPIVersions}}
		return resp
	}
	resp.Version = h.version
	resp.ApiKeys = b.apiKeys
	return resp
}

// decodeRequest parses a request frame body: header v1/v2 and the body.
func decodeRequest(frame []byte) (reqHeader, kmsg.Request, error) {
	var h reqHeader
	if len(frame) < 10 {
		return h, nil, errors.New("short request header")
	}
	h.key = int16(binary.BigEndian.Uint16(frame))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.corr = int32(binary.BigEndian.Uint32(frame[4:]))
	n := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	if n > 0 {
		h.clientID, rest = string(rest[:n]), rest[n:]
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return h, nil, errors.New("unknown key")
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if len(rest) == 0 || rest[0] != 0 {
			return h, nil, errors.New("expected an empty tag section in the request header")
		}
		rest = rest[1:]
	}
	if err := req.ReadFrom(rest); err != nil {
		return h, nil, err
	}
	return h, req, nil
}

func encodeResponse(h reqHeader, resp kmsg.Response) []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(h.corr))
	if resp.IsFlexible() && h.key != 18 {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// metadataEcho answers a Metadata request with the topics it asked for.
func metadataEcho(h reqHeader, req kmsg.Request) kmsg.Response {
	mr, ok := req.(*kmsg.MetadataRequest)
	if !ok {
		return nil
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = h.version
	for _, t := range mr.Topics {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = t.Topic
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func metadataReq(topic string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	r.Topics = append(r.Topics, t)
	return r
}

// silentListener accepts connections and never answers.
func silentListener(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

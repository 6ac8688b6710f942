package conn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/sasl"
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// authenticate runs the first SASL exchange synchronously on c.nc, after
// ApiVersions and before the goroutines start.
func (c *Conn) authenticate(ctx context.Context) error {
	br := bufio.NewReaderSize(c.nc, 4096)
	roundTrip := func(req kmsg.Request) (kmsg.Response, error) {
		corr := c.corr
		c.corr++
		if _, err := c.nc.Write(c.format.AppendRequest(nil, req, corr)); err != nil {
			return nil, c.saslNetErr(err)
		}
		body, err := readFrame(br)
		if err != nil {
			return nil, c.saslNetErr(err)
		}
		got, _, err := parseResponseHeader(body, req.IsFlexible())
		if err != nil {
			return nil, fmt.Errorf("conn: %s: %s: %w", c.addr, kmsg.NameForKey(req.Key()), err)
		}
		if got != corr {
			return nil, fmt.Errorf("conn: %s: %w: %s response correlation id %d, want %d", c.addr, kerr.NetworkException, kmsg.NameForKey(req.Key()), got, corr)
		}
		resp, err := decodeResponse(req, body)
		if err != nil {
			return nil, fmt.Errorf("conn: %s: %w", c.addr, err)
		}
		return resp, nil
	}
	start := time.Now()
	lifetime, err := c.saslExchange(ctx, roundTrip)
	if err != nil {
		return err
	}
	c.setReauth(start, lifetime)
	return nil
}

// saslNetErr wraps an I/O error of the exchange: a broker that closes the
// connection during it is retried like any broken connection.
func (c *Conn) saslNetErr(err error) error {
	return fmt.Errorf("conn: %s: SASL handshake: %w: %w", c.addr, kerr.NetworkException, err)
}

// authErr wraps a failure of the exchange that a retry cannot fix.
func (c *Conn) authErr(mech string, err error) error {
	return fmt.Errorf("conn: %s: SASL %s: %w: %w", c.addr, mech, ErrAuthentication, err)
}

// saslExchange runs SaslHandshake v1 and the SaslAuthenticate rounds of
// the mechanism through roundTrip, and returns the broker's session
// lifetime (0: none).
func (c *Conn) saslExchange(ctx context.Context, roundTrip func(kmsg.Request) (kmsg.Response, error)) (time.Duration, error) {
	mech := c.cfg.SASL
	name := mech.Name()
	hv, av := c.MaxVersion(saslHandshakeKey), c.MaxVersion(saslAuthenticateKey)
	if hv < 1 || av < 0 {
		return 0, c.authErr(name, errors.New("the broker does not support SaslHandshake v1 and SaslAuthenticate (Kafka 1.0+); is this a SASL listener?"))
	}
	hreq := kmsg.NewPtrSASLHandshakeRequest()
	hreq.Version = 1
	hreq.Mechanism = name
	resp, err := roundTrip(hreq)
	if err != nil {
		return 0, err
	}
	if err := c.saslRespErr(name, resp); err != nil {
		return 0, err
	}

	sess, msg, err := c.saslStart(ctx, mech)
	if err != nil {
		return 0, c.authErr(name, err)
	}
	done := false
	for {
		areq := kmsg.NewPtrSASLAuthenticateRequest()
		areq.Version = av
		areq.SASLAuthBytes = msg
		resp, err := roundTrip(areq)
		if err != nil {
			return 0, err
		}
		if err := c.saslRespErr(name, resp); err != nil {
			return 0, err
		}
		aresp := resp.(*kmsg.SASLAuthenticateResponse)
		if done {
			return lifetimeOf(aresp), nil
		}
		done, msg, err = c.saslStep(sess, aresp.SASLAuthBytes)
		if err != nil {
			return 0, c.authErr(name, cleanErr(mech, err))
		}
		if done && len(msg) == 0 {
			return lifetimeOf(aresp), nil
		}
	}
}

// saslStart runs mech.Start, and saslStep sess.Step: user code (a token
// callback, a custom Mechanism) on the goroutine that authenticates (a
// dial's, the metadata client's, or the writer's at re-authentication). A
// panic there is recovered and becomes the exchange's error, so it fails
// like a refused token (ErrAuthentication) instead of crashing the program.
func (c *Conn) saslStart(ctx context.Context, mech sasl.Mechanism) (sess sasl.Session, msg []byte, err error) {
	defer c.recoverUser(&err, "SASL mechanism's Start")
	return mech.Start(ctx, c.addr)
}

func (c *Conn) saslStep(sess sasl.Session, challenge []byte) (done bool, msg []byte, err error) {
	defer c.recoverUser(&err, "SASL session's Step")
	return sess.Step(challenge)
}

// recoverUser is deferred around a call of user code named what: it turns
// a panic into *err and logs it, with its stack, at Error. The panic's
// value is printed capped at maxPanicText bytes: it is the user's own
// text, but a long one (a dumped request, a token) has no place in every
// record's error.
func (c *Conn) recoverUser(err *error, what string) {
	v := recover()
	if v == nil {
		return
	}
	text := panicText(v)
	c.cfg.Logger.Error("conn: user code panicked; the panic was recovered", "addr", c.addr, "in", what, "panic", text, "stack", string(debug.Stack()))
	*err = fmt.Errorf("the %s panicked: %s", what, text)
}

// maxPanicText caps a recovered panic's value in errors and logs.
const maxPanicText = 200

// panicText prints a recovered panic's value, capped at maxPanicText
// bytes (cut on a rune boundary).
func panicText(v any) string {
	s := fmt.Sprint(v)
	if len(s) <= maxPanicText {
		return s
	}
	n := maxPanicText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// saslRespErr returns the authentication error a SaslHandshake or
// SaslAuthenticate response carries, if any.
func (c *Conn) saslRespErr(mech string, resp kmsg.Response) error {
	// The broker's text is cleaned of the mechanism's secrets and
	// bounded (BrokerText): a broker that quotes the client's PLAIN
	// message or lists megabytes of mechanisms gets neither into errors
	// nor logs.
	switch r := resp.(type) {
	case *kmsg.SASLHandshakeResponse:
		if err := kerr.ForCode(r.ErrorCode); err != nil {
			return c.authErr(mech, fmt.Errorf("%w (the broker enables %s)", err, BrokerTexts(c.cfg.SASL, r.SupportedMechanisms)))
		}
	case *kmsg.SASLAuthenticateResponse:
		if err := BrokerError(c.cfg.SASL, r.ErrorCode, r.ErrorMessage); err != nil {
			return c.authErr(mech, err)
		}
	}
	return nil
}

func lifetimeOf(r *kmsg.SASLAuthenticateResponse) time.Duration {
	ms := r.SessionLifetimeMillis
	if ms <= 0 {
		return 0
	}
	const maxMs = int64(365 * 24 * time.Hour / time.Millisecond)
	return time.Duration(min(ms, maxMs)) * time.Millisecond
}

// setReauth schedules re-authentication (KIP-368) at 85% to 95% of the
// session lifetime, like the Java client, and at least a second before its
// end (a quarter of the lifetime, for sessions shorter than 4 s); counted
// from before the exchange started (the broker counts from its end), so
// this errs early.
func (c *Conn) setReauth(start time.Time, lifetime time.Duration) {
	if lifetime <= 0 {
		c.reauthAt = 0
		return
	}
	d := time.Duration(float64(lifetime) * (0.85 + 0.1*rand.Float64()))
	// The broker checks the expiry when it reads a request, which may
	// wait behind others in flight: the last request written before the
	// exchange needs a margin that does not shrink with the lifetime
	// (5% of a 600 ms session was too little on a loaded machine).
	d = min(d, lifetime-min(time.Second, lifetime/4))
	at := start.Add(d)
	c.reauthAt = at.UnixNano()
	c.cfg.Logger.Debug("SASL session established", "addr", c.addr, "mechanism", c.cfg.SASL.Name(), "lifetime", lifetime, "reauth_in", time.Until(at))
}

// reauthDue reports whether the writer must re-authenticate before it
// writes the next request. Only the writer reads and writes reauthAt once
// the goroutines run.
func (c *Conn) reauthDue() bool {
	return c.reauthAt != 0 && time.Now().UnixNano() >= c.reauthAt
}

// reauthenticate runs a new SASL exchange (KIP-368) from the writer, with
// nothing of the writer's buffered. Requests already in flight stay there:
// the broker answers them in order before the SaslHandshake, so the reader
// completes them as usual and then hands each exchange response back here.
// New requests wait in the queue until the exchange is over. A failure
// breaks the connection; every pending request then fails with it, once
// the writer has returned (failPending), so the writer never waits for an
// exchange request's callback on a broken connection.
func (c *Conn) reauthenticate() error {
	c.cfg.Logger.Debug("SASL re-authentication (KIP-368)", "addr", c.addr, "mechanism", c.cfg.SASL.Name())
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RequestTimeout)
	defer cancel()
	ch := make(chan result, 1)
	var buf []byte
	roundTrip := func(req kmsg.Request) (kmsg.Response, error) {
		req.SetVersion(c.MaxVersion(req.Key()))
		p := getPending()
		p.req = req
		p.fn = func(r kmsg.Response, err error) {
			// The broker closes the connection right after a
			// rejection: break it with the rejection before the
			// reader sees the close.
			if err == nil {
				if aerr := c.saslRespErr(c.cfg.SASL.Name(), r); aerr != nil {
					c.fail(aerr)
				}
			}
			ch <- result{r, err}
		}
		c.mu.Lock()
		if err := c.err; err != nil {
			c.mu.Unlock()
			putPending(p)
			return nil, err
		}
		p.corr = c.corr
		c.corr++
		p.seq = c.seq
		c.seq++
		c.mu.Unlock()
		buf = c.format.AppendRequest(buf[:0], req, p.corr)
		p.placed, p.off = true, c.queued
		if !c.launch(p) { // handed back: failPending completes it later
			return nil, c.Err()
		}
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.cfg.RequestTimeout))
		n, err := c.wire.Write(buf)
		c.queued += int64(n)
		if err != nil {
			c.fail(c.brokenErr(err, "write"))
		}
		// The reader completes p with its answer. If the connection
		// breaks first, p is failed only after this goroutine returns
		// (into ch, which has room for it).
		select {
		case r := <-ch:
			if r.err != nil {
				return nil, r.err
			}
			return r.resp, nil
		case <-c.done:
			return nil, c.Err()
		}
	}
	start := time.Now()
	lifetime, err := c.saslExchange(ctx, roundTrip)
	if err != nil {
		return err
	}
	c.setReauth(start, lifetime)
	return nil
}

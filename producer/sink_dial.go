// The IO goroutine's broker connections: dials in short-lived goroutines,
// their results, and the backoff between attempts.

package producer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-go/samsa/internal/conn"
)

func (s *sink) dial(br *ioBroker) {
	if br.dialing || s.now.Before(br.backoff) {
		return
	}
	br.dialing = true
	addr, cfg := br.addr, s.brokerConn(br)
	if id := s.p.meta.ClusterID(); id != "" && !s.cfg.DisableMetadataClusterCheck {
		// KIP-1242: a broker that is not this node of our cluster
		// refuses the handshake, and nothing is written to it.
		cfg.Expect = conn.Identity{ClusterID: id, NodeID: br.id}
	}
	s.background.Go(func() {
		// Close ends the dial at once (closing is canceled before quit);
		// conn.Dial bounds it by the setup timeout, up to DialTimeoutMax.
		ctx, cancel := context.WithTimeout(s.p.closing, max(cfg.DialTimeout, cfg.DialTimeoutMax)+time.Second)
		defer cancel()
		start := time.Now()
		c, err := conn.Dial(ctx, addr, cfg)
		if err == nil && cfg.Expect.ClusterID != "" && !c.Identified() {
			// A broker before Kafka 4.4 cannot check ApiVersions
			// v5: its Metadata answer says which cluster it is of,
			// before any Produce is written.
			if err = checkClusterOf(ctx, c, cfg.Expect.ClusterID, cfg.SASL); err != nil {
				c.Close()
				c = nil
			}
		}
		select {
		case s.dials <- dialResult{broker: br, conn: c, err: err, took: time.Since(start)}:
		case <-s.p.quit:
			if c != nil {
				c.Close()
			}
		}
	})
}

func (s *sink) handleDial(d dialResult) {
	br := d.broker
	br.dialing = false
	select {
	case <-s.p.quit:
		if d.conn != nil {
			d.conn.Close()
		}
		return
	default:
	}
	if d.err != nil {
		s.p.reach.failed()
		s.observeDial(br, d.took, d.err)
		br.failures++
		br.lastErr = d.err
		br.backoff = time.Now().Add(s.backoff(br.failures))
		// At Warn when the outage starts and once a minute while it
		// lasts; records that time out carry the error. An
		// authentication failure or listener mismatch fails the
		// broker's records (authFailed): at Error.
		level := s.p.logRepeat.Level("dial "+br.addr, s.now)
		msg := "cannot connect to broker"
		if auth := errors.Is(d.err, ErrAuthentication); auth {
			msg = "cannot connect to broker: failing its records"
			if level == slog.LevelWarn {
				level = slog.LevelError
			}
		}
		s.p.log.Log(context.Background(), level, msg, "broker", br.id, "addr", br.addr, "err", d.err, "failures", br.failures)
		switch {
		case errors.Is(d.err, ErrClusterMismatch) && br.hinted:
			// An address from a Produce answer (KIP-951) leads to
			// another cluster: the bootstrap brokers are fine. Forget
			// it; the metadata says where the partitions are.
			s.p.meta.Trigger()
			if br.inflight == 0 && s.brokers[br.id] == br {
				s.forgetHintedLeader(br)
				s.removeBroker(br)
			}
			return
		case errors.Is(d.err, ErrClusterMismatch):
			// The address leads elsewhere now: look for our
			// cluster at the bootstrap brokers (KIP-1242).
			s.p.meta.Rebootstrap()
		default:
			s.p.meta.Trigger()
		}
		s.authFailed(br, d.err)
		return
	}
	if v := d.conn.MaxVersion(kmsg.Produce.Int16()); v < 3 {
		d.conn.Close()
		br.failures++
		br.backoff = time.Now().Add(s.backoff(br.failures))
		s.p.log.Error("broker does not support Produce v3+ (Kafka 0.11+ is required)", "broker", br.id, "addr", br.addr)
		return
	}
	if br.failures > 0 && s.p.logRepeat.Reset("dial "+br.addr) {
		s.p.log.Info("connected to broker again", "broker", br.id, "addr", br.addr, "failures", br.failures)
	}
	br.failures, br.lastErr = 0, nil
	br.conn = d.conn
	br.used = time.Now() // s.now is the last step's
	if s.txn != nil {
		s.p.txn.client.features.observe(d.conn) // transaction.version
	}
	s.p.reach.ok()
	s.observeDial(br, d.took, nil)
}

// closeIdle closes br's connection, which has nothing in flight, once it
// has been idle for ConnMaxIdle (connections.max.idle.ms), and returns
// next, or the time it is due if that is earlier: the IO goroutine's timer
// wakes for it, and no other timer or goroutine exists for idleness.
// Nothing is being written either: the IO goroutine writes only through
// sendOne, which counts the request in br.inflight before handing it over.
// The next request to br dials again (sendAll). A connection the broker
// or the network closed first (their idle timeout shorter than
// ConnMaxIdle) is dropped with its error, for HookBrokerDisconnected.
func (s *sink) closeIdle(br *ioBroker, next time.Time) time.Time {
	if s.cfg.ConnMaxIdle <= 0 { // never
		return next
	}
	due := br.used.Add(s.cfg.ConnMaxIdle)
	if due.After(s.now) {
		if due.Before(next) {
			return due
		}
		return next
	}
	select {
	case <-br.conn.Done():
		// The broker or the network closed it first (its idle timeout
		// shorter than ConnMaxIdle): HookBrokerDisconnected gets why.
		err := br.conn.Err()
		s.p.log.Debug("broker connection closed while idle; dropping it", "broker", br.id, "addr", br.addr, "idle", s.now.Sub(br.used), "err", err)
		s.dropConn(br, err)
	default:
		s.p.log.Debug("closing idle broker connection", "broker", br.id, "addr", br.addr, "idle", s.now.Sub(br.used), "max_idle", s.cfg.ConnMaxIdle)
		s.dropConn(br, nil) // HookBrokerDisconnected: nil, the producer closed it
	}
	return next
}

// connUsable reports whether br's connection may carry a request. A
// connection that broke while nothing was in flight (a broker closes
// connections idle for its connections.max.idle.ms, and a NAT or a load
// balancer drops them) is dropped at once, and the next request dials
// again: no request was lost with it, so it costs no retry, no backoff and
// no ErrOutcomeUnknown. One that broke with requests in flight is left to
// their failures (handleResponse), which drop it; meanwhile nothing is
// sent on it.
func (s *sink) connUsable(br *ioBroker) bool {
	select {
	case <-br.conn.Done():
	default:
		return true
	}
	if br.inflight > 0 {
		return false
	}
	err := br.conn.Err()
	s.p.log.Debug("broker connection closed while idle; reconnecting", "broker", br.id, "addr", br.addr, "idle", s.now.Sub(br.used), "err", err)
	s.dropConn(br, err)
	return true
}

// backoff returns the wait before attempt n (1-based): RetryBackoff doubled
// per attempt, capped at RetryBackoffMax, with ±20% jitter (KIP-580).
func (s *sink) backoff(n int) time.Duration {
	return conn.Backoff(n, s.cfg.RetryBackoff, s.cfg.RetryBackoffMax)
}

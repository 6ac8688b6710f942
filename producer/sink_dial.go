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
		if errors.Is(d.err, ErrClusterMismatch) {
			// The address leads elsewhere now: look for our
			// cluster at the bootstrap brokers (KIP-1242).
			s.p.meta.Rebootstrap()
		} else {
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
	if s.txn != nil {
		s.p.txn.client.features.observe(d.conn) // transaction.version
	}
	s.observeDial(br, d.took, nil)
}

// backoff returns the wait before attempt n (1-based): RetryBackoff doubled
// per attempt, capped at RetryBackoffMax, with ±20% jitter (KIP-580).
func (s *sink) backoff(n int) time.Duration {
	return conn.Backoff(n, s.cfg.RetryBackoff, s.cfg.RetryBackoffMax)
}

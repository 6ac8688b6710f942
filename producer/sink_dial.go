// The IO goroutine's broker connections: dials in short-lived goroutines,
// their results, and the backoff between attempts.

package producer

import (
	"context"
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
	s.background.Go(func() {
		// Close ends the dial at once (closing is canceled before quit).
		ctx, cancel := context.WithTimeout(s.p.closing, cfg.DialTimeout+time.Second)
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
		// Once at Warn per outage; records that time out carry the error.
		level := slog.LevelDebug
		if br.failures == 1 {
			level = slog.LevelWarn
		}
		s.p.log.Log(context.Background(), level, "cannot connect to broker", "broker", br.id, "addr", br.addr, "err", d.err, "failures", br.failures)
		s.p.meta.Trigger()
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
	br.failures, br.lastErr = 0, nil
	br.conn = d.conn
	s.observeDial(br, d.took, nil)
}

// backoff returns the wait before attempt n (1-based): RetryBackoff doubled
// per attempt, capped at RetryBackoffMax, with ±20% jitter (KIP-580).
func (s *sink) backoff(n int) time.Duration {
	return conn.Backoff(n, s.cfg.RetryBackoff, s.cfg.RetryBackoffMax)
}

package producer

import (
	"errors"
	"fmt"
)

// failAuth: the metadata client cannot authenticate to any broker
// (ErrAuthentication): the topic's records fail fast until a fetch
// succeeds again. It sits with the other failKinds of sink.go.
const failAuth failKind = 100

// checkAuth runs with every metadata update (applyMetadata): while the last
// fetch failed on authentication, every topic fails its parked records and
// waiting batches at once, and its new Sends fast; once a fetch succeeds
// again they wait as usual.
func (s *sink) checkAuth() {
	err := s.p.meta.Err()
	auth := err != nil && errors.Is(err, ErrAuthentication)
	for _, t := range s.topics {
		switch {
		case auth && t.failing == notFailing:
			terr := fmt.Errorf("topic %q: cannot connect to the cluster: %w", t.name, err)
			s.failTopic(t, failAuth, terr)
			for _, ip := range t.parts {
				s.failWaiting(ip, terr)
			}
		case !auth && t.failing == failAuth:
			s.setFailing(t, notFailing, nil)
		}
	}
}

// authFailed runs when a dial to br failed (handleDial logs it): on an
// authentication failure or a listener mismatch the batches waiting for br fail at once instead of being retried until
// DeliveryTimeout (the dial itself is retried with backoff, for new
// batches, so that fixed credentials are picked up).
func (s *sink) authFailed(br *ioBroker, err error) {
	if !errors.Is(err, ErrAuthentication) {
		return
	}
	berr := fmt.Errorf("broker %d (%s): %w", br.id, br.addr, err)
	for _, ip := range br.ready {
		if ip.leader == br.id {
			s.failWaiting(ip, berr)
		}
	}
}

// failWaiting fails ip's batches that are not in flight: its retries and
// its sealed batches.
func (s *sink) failWaiting(ip *ioPart, err error) {
	for _, b := range ip.retry {
		s.fail(ip, b, err)
	}
	clear(ip.retry)
	ip.retry = ip.retry[:0]
	for {
		b := ip.acc.PeekSealed()
		if b == nil {
			break
		}
		ip.acc.NextSealed()
		s.fail(ip, b, err)
	}
	ip.hasSealed = false
}

package producer

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/accumulator"
	"github.com/samsa-go/samsa/internal/conn"
	"github.com/samsa-go/samsa/internal/testbroker"
	"github.com/samsa-go/samsa/internal/testutil"
	"github.com/samsa-go/samsa/kerr"
	"github.com/samsa-go/samsa/metadata"
)

// Tests of how the producer finds its topics: auto-creation, and what a
// record of a topic that cannot be produced to gets.

// TestUnknownTopicIsAutoCreatedByDefault: like the Java producer
// (allow.auto.create.topics=true), the producer's Metadata requests ask a
// broker that auto-creates topics (the broker default) to create the topic,
// so the quick start works without creating topics first.
func TestUnknownTopicIsAutoCreatedByDefault(t *testing.T) {
	c := newCluster(t, testbroker.Config{AllowAutoTopicCreation: true, DefaultPartitions: 2})
	p := newProducer(t, c, Config{DeliveryTimeout: 3 * time.Second, RequestTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := p.Send(ctx, &Record{Topic: "created-by-metadata", Value: []byte("v")}).Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "created-by-metadata", md.Topic)
	recs, err := c.Records("created-by-metadata", md.Partition)
	require.NoError(t, err)
	require.Len(t, recs, 1)
}

// TestDisableAutoTopicCreationLeavesTopicMissing: with
// DisableAutoTopicCreation, Metadata requests do not create the topic, even
// on a broker that would.
func TestDisableAutoTopicCreationLeavesTopicMissing(t *testing.T) {
	c := newCluster(t, testbroker.Config{AllowAutoTopicCreation: true})
	p := newProducer(t, c, Config{DisableAutoTopicCreation: true, MaxBlock: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := p.Send(ctx, &Record{Topic: "never-created", Value: []byte("v")}).Wait(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), `"never-created"`)
	_, err = c.Records("never-created", 0)
	require.Error(t, err, "the topic was created")
}

// completedAtOnce reports whether f was completed before Send returned.
func completedAtOnce(f *Future) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}

// TestUnauthorizedTopicFailsAtOnce: a topic the producer may not write to
// (TOPIC_AUTHORIZATION_FAILED in Metadata, not retriable), or one the
// broker finds invalid (INVALID_TOPIC_EXCEPTION), fails its parked records
// as soon as the answer comes, not after MaxBlock or DeliveryTimeout, with
// an error naming the topic and the code; later Sends fail at once while
// the condition lasts, and once the broker accepts the topic, records go
// through again.
func TestUnauthorizedTopicFailsAtOnce(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.TopicAuthorizationFailed, kerr.InvalidTopicException} {
		t.Run(code.Name, func(t *testing.T) { testTopicFailsAtOnce(t, code) })
	}
}

func testTopicFailsAtOnce(t *testing.T, code *kerr.Error) {
	c := newCluster(t, testbroker.Config{})
	require.NoError(t, c.CreateTopic("secret", 1))
	remove := c.Intercept(testbroker.Interceptor{Keys: []int16{3}, ErrorCode: code.Code})
	p := newProducer(t, c, Config{MaxBlock: time.Minute, DeliveryTimeout: 2 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := p.Send(ctx, &Record{Topic: "secret", Value: []byte("v")}).Wait(ctx)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the record waited for MaxBlock or DeliveryTimeout")
	var ke *KafkaError
	require.ErrorAs(t, err, &ke)
	require.Equal(t, code.Code, ke.Code)
	require.Contains(t, err.Error(), `"secret"`)
	require.Contains(t, err.Error(), code.Name)

	f := p.Send(ctx, &Record{Topic: "secret", Value: []byte("v")})
	require.True(t, completedAtOnce(f), "a Send to a topic known to fail fails at once")
	_, err = f.Wait(ctx)
	require.ErrorAs(t, err, &ke)
	require.Equal(t, code.Code, ke.Code)

	remove()
	var md RecordMetadata
	require.Eventually(t, func() bool {
		md, err = p.Send(ctx, &Record{Topic: "secret", Value: []byte("ok")}).Wait(ctx)
		return err == nil
	}, 8*time.Second, 20*time.Millisecond, "records go through once the topic is accepted: %v", err)
	require.Equal(t, "secret", md.Topic)
}

// TestMissingTopicFailsAfterMaxBlock: a topic that does not appear in
// metadata fails its records after MaxBlock, as the Java producer's send
// does ("not present in metadata after ..."), with an error naming the topic
// and the code, instead of holding pool memory shared with healthy topics
// until DeliveryTimeout. While it stays missing, Sends fail at once; once
// it exists, records go through.
func TestMissingTopicFailsAfterMaxBlock(t *testing.T) {
	c := newCluster(t, testbroker.Config{}) // does not auto-create
	require.NoError(t, c.CreateTopic("healthy", 1))
	p := newProducer(t, c, Config{MaxBlock: 300 * time.Millisecond, DeliveryTimeout: 2 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var fs []*Future
	for range 100 {
		fs = append(fs, p.Send(ctx, &Record{Topic: "missing", Value: make([]byte, 100)}))
	}
	for _, f := range fs {
		_, err := f.Wait(ctx)
		require.NoError(t, ctx.Err(), "records of the missing topic waited for DeliveryTimeout")
		require.ErrorIs(t, err, ErrDeliveryTimeout)
		require.ErrorIs(t, err, kerr.UnknownTopicOrPartition)
		require.Contains(t, err.Error(), `topic "missing" not present in metadata after 300ms`)
	}
	_, err := p.Send(ctx, &Record{Topic: "healthy", Value: []byte("v")}).Wait(ctx)
	require.NoError(t, err)
	require.Zero(t, p.Stats().BufferUsed, "the missing topic holds no pool memory")

	f := p.Send(ctx, &Record{Topic: "missing", Value: []byte("v")})
	require.True(t, completedAtOnce(f), "a Send to a topic known to be missing fails at once")
	_, err = f.Wait(ctx)
	require.ErrorIs(t, err, kerr.UnknownTopicOrPartition)

	require.NoError(t, c.CreateTopic("missing", 1))
	require.Eventually(t, func() bool {
		_, err = p.Send(ctx, &Record{Topic: "missing", Value: []byte("ok")}).Wait(ctx)
		return err == nil
	}, 8*time.Second, 20*time.Millisecond, "records go through once the topic exists: %v", err)
}

// TestUnreachableClusterErrorNamesTheCause: with no broker reachable, a
// record fails with the real cause (the dial error, naming the address),
// not as a missing topic; the outage is logged once at Warn.
func TestUnreachableClusterErrorNamesTheCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused

	var logs testutil.SyncBuffer
	p, err := New(Config{
		Brokers: []string{addr}, MaxBlock: 500 * time.Millisecond,
		RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}).Wait(ctx)
	require.NoError(t, ctx.Err(), "the record waited for DeliveryTimeout")
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.ErrorIs(t, err, metadata.ErrNoBroker)
	require.False(t, errors.Is(err, kerr.UnknownTopicOrPartition), "reported as a missing topic: %v", err)
	require.Contains(t, err.Error(), addr)
	require.Contains(t, err.Error(), "refused")
	require.Equal(t, 1, strings.Count(logs.String(), "metadata fetch failed"), "logged once at Warn:\n%s", logs.String())
}

// TestFailedHandshakeIsReportedAsSuch: a broker whose ApiVersions answer
// cannot be read makes records fail with that cause (the handshake, the
// broker's address), not as a missing topic.
func TestFailedHandshakeIsReportedAsSuch(t *testing.T) {
	b := newHostileBroker(t, 18, "garbage")
	defer b.close()
	p, err := New(Config{Brokers: []string{b.addr()}, MaxBlock: 300 * time.Millisecond,
		RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = p.Send(ctx, &Record{Topic: "t", Value: []byte("v")}).Wait(ctx)
	require.NoError(t, ctx.Err())
	require.Error(t, err)
	require.Contains(t, err.Error(), "ApiVersions")
	require.Contains(t, err.Error(), b.addr())
	require.False(t, errors.Is(err, kerr.UnknownTopicOrPartition), "reported as a missing topic: %v", err)
}

// TestParkedTopicWithErrorDoesNotSpin: while a parked topic's metadata has
// an error other than UNKNOWN_TOPIC_OR_PARTITION (LEADER_NOT_AVAILABLE while
// a topic is being created, an authorization error), the IO goroutine must
// sleep until something is due, not spin: resetTimer takes the zero createAt
// of a topic that maybeCreateTopic will never create as a deadline, so with
// AutoCreateTopics on the timer fires at once, step changes nothing, and
// the loop repeats until DeliveryTimeout.
func TestParkedTopicWithErrorDoesNotSpin(t *testing.T) {
	p := &Producer{cfg: Config{AutoCreateTopics: true, DisableIdempotence: true, Linger: 5 * time.Millisecond, DeliveryTimeout: time.Minute}}
	s := newSink(p, conn.Config{})
	acc := accumulator.New[completion, *ioPart, sendState](accumulator.Config{})
	topic := &ioTopic{name: "creating", ts: &topicState{acc: acc.NewTopic("creating")}, err: kerr.LeaderNotAvailable}
	s.parked[topic] = struct{}{}
	for range 3 {
		s.now = time.Now()
		s.moveParked() // len(parts) == 0: maybeCreateTopic, which does nothing for this error
		s.resetTimer()
		select {
		case <-s.timer.C:
			t.Fatal("the IO goroutine's timer fired at once although nothing is due")
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.timer.Stop()
}

package testbroker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestQuotaPrecedence: a connection of user alice and client id app gets
// the most specific quota in Kafka's order, and the bucket is shared as
// Kafka's metric tags share it.
func TestQuotaPrecedence(t *testing.T) {
	u, d, none := namedPart("alice"), defaultPart, entityPart{}
	c := namedPart("app")
	levels := []struct {
		e      quotaEntity
		bucket string
	}{
		{quotaEntity{u, c}, "user=alice\x00client-id=app"},
		{quotaEntity{u, d}, "user=alice\x00client-id=app"},
		{quotaEntity{u, none}, "user=alice"},
		{quotaEntity{d, c}, "user=alice\x00client-id=app"},
		{quotaEntity{d, d}, "user=alice\x00client-id=app"},
		{quotaEntity{d, none}, "user=alice"},
		{quotaEntity{none, c}, "\x00client-id=app"},
		{quotaEntity{none, d}, "\x00client-id=app"},
	}
	// With levels i.. set, level i wins.
	for i := range levels {
		var q clientQuotas
		for j := i; j < len(levels); j++ {
			q.applyLocked(levels[j].e, []kmsg.AlterClientQuotasRequestEntryOp{{Key: quotaKeyMutationRate, Value: float64(j + 1)}})
		}
		// Quotas of other users and client ids never match.
		q.applyLocked(quotaEntity{namedPart("bob"), none}, []kmsg.AlterClientQuotasRequestEntryOp{{Key: quotaKeyMutationRate, Value: 100}})
		q.applyLocked(quotaEntity{none, namedPart("other")}, []kmsg.AlterClientQuotasRequestEntryOp{{Key: quotaKeyMutationRate, Value: 100}})
		rate, bucket, ok := q.resolve(quotaKeyMutationRate, "alice", "app")
		require.True(t, ok, "level %d", i+1)
		assert.InDelta(t, float64(i+1), rate, 0, "level %d", i+1)
		assert.Equal(t, levels[i].bucket, bucket, "level %d", i+1)
		_, _, ok = q.resolve(quotaKeyProducerByteRate, "alice", "app")
		assert.False(t, ok, "another key")
	}
}

func quotaEntry(user, client *string, key string, value float64, remove bool) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	if user != nil {
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type = entityUser
		if *user != "" {
			ent.Name = user
		}
		e.Entity = append(e.Entity, ent)
	}
	if client != nil {
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type = entityClientID
		if *client != "" {
			ent.Name = client
		}
		e.Entity = append(e.Entity, ent)
	}
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value, op.Remove = key, value, remove
	e.Ops = append(e.Ops, op)
	return e
}

// TestAlterDescribeClientQuotas: quotas set with AlterClientQuotas are
// described back with the filter semantics of KIP-546, take effect on the
// next request (a user quota on ANONYMOUS, the principal of an
// unauthenticated connection, beats Config.MutationRate), and bad entries
// fail alone.
func TestAlterDescribeClientQuotas(t *testing.T) {
	clock := newFakeClock()
	c := newTestCluster(t, Config{Brokers: 1, MutationRate: 1000, Clock: clock.Now})
	w := dialBroker(t, c.Addrs()[0], "app")
	anon, dflt, app := anonymousPrincipal, "", "app"

	alter := kmsg.NewPtrAlterClientQuotasRequest()
	alter.Entries = []kmsg.AlterClientQuotasRequestEntry{
		quotaEntry(&anon, nil, quotaKeyMutationRate, 1, false),   // rate 1: burst 100
		quotaEntry(&dflt, &app, quotaKeyMutationRate, 50, false), // lower precedence than the user
		quotaEntry(nil, &dflt, quotaKeyProducerByteRate, 1e6, false),
		quotaEntry(nil, &app, "consumer_byte_rate", 1, false),
		quotaEntry(nil, &app, quotaKeyMutationRate, -1, false),
	}
	ar := w.request(alter).(*kmsg.AlterClientQuotasResponse)
	require.Len(t, ar.Entries, 5)
	for i, code := range []int16{0, 0, 0, ecInvalidRequest, ecInvalidRequest} {
		assert.Equal(t, code, ar.Entries[i].ErrorCode, "entry %d", i)
	}

	describe := func(strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) []string {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Components, req.Strict = comps, strict
		resp := w.request(req).(*kmsg.DescribeClientQuotasResponse)
		require.Zero(t, resp.ErrorCode)
		var got []string
		for _, e := range resp.Entries {
			s := entityString(e.Entity)
			for _, v := range e.Values {
				s += " " + v.Key
			}
			got = append(got, s)
		}
		return got
	}
	comp := func(typ string, mt kmsg.QuotasMatchType, name *string) kmsg.DescribeClientQuotasRequestComponent {
		return kmsg.DescribeClientQuotasRequestComponent{EntityType: typ, MatchType: mt, Match: name}
	}
	assert.Equal(t, []string{
		"client-id<default>; producer_byte_rate",
		"user<default>;client-id=app; controller_mutation_rate",
		"user=ANONYMOUS; controller_mutation_rate",
	}, describe(false))
	assert.Equal(t, []string{"user=ANONYMOUS; controller_mutation_rate"},
		describe(false, comp(entityUser, kmsg.QuotasMatchTypeExact, &anon)))
	assert.Equal(t, []string{"user<default>;client-id=app; controller_mutation_rate"},
		describe(false, comp(entityUser, kmsg.QuotasMatchTypeDefault, nil)))
	assert.Equal(t, []string{"user<default>;client-id=app; controller_mutation_rate", "user=ANONYMOUS; controller_mutation_rate"},
		describe(false, comp(entityUser, kmsg.QuotasMatchTypeAny, nil)))
	assert.Equal(t, []string{"user=ANONYMOUS; controller_mutation_rate"},
		describe(true, comp(entityUser, kmsg.QuotasMatchTypeAny, nil)), "strict: no client-id component")

	bad := kmsg.NewPtrDescribeClientQuotasRequest()
	bad.Components = []kmsg.DescribeClientQuotasRequestComponent{comp("ip", kmsg.QuotasMatchTypeAny, nil)}
	assert.Equal(t, ecInvalidRequest, w.request(bad).(*kmsg.DescribeClientQuotasResponse).ErrorCode)

	// The user quota (R = 1, B = 100) applies, not MutationRate 1000.
	resp := w.request(createTopicsRequest(7, "q", 3, 60)).(*kmsg.CreateTopicsResponse)
	codes, throttle := createTopicsCodes(resp)
	assert.Equal(t, []int16{0, 0, ecThrottlingQuotaExceeded}, codes)
	assert.EqualValues(t, 20000, throttle)

	// Removing it falls back to <default>/app (R = 50, its own full bucket).
	alter.Entries = []kmsg.AlterClientQuotasRequestEntry{quotaEntry(&anon, nil, quotaKeyMutationRate, 0, true)}
	w2 := dialBroker(t, c.Addrs()[0], "app") // w is muted for 20 s
	require.Zero(t, w2.request(alter).(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode)
	resp = w2.request(createTopicsRequest(7, "r", 3, 60)).(*kmsg.CreateTopicsResponse)
	codes, _ = createTopicsCodes(resp)
	assert.Equal(t, []int16{0, 0, 0}, codes, "burst 5000")
}

// TestUserQuotaFollowsSASLPrincipal: over SASL, the user entity of the
// quotas is the authenticated principal: alice's controller_mutation_rate
// refuses her third 60-partition topic, while bob, another user with the
// same client id, falls back to the client-id default and is not refused.
func TestUserQuotaFollowsSASLPrincipal(t *testing.T) {
	clock := newFakeClock()
	c := newTestCluster(t, Config{Brokers: 1, Clock: clock.Now, Security: &Security{
		Listeners: []Listener{{Protocol: SASLPlaintext}},
		Users:     []User{{Mechanism: MechPlain, Name: "alice", Password: "a-secret"}, {Mechanism: MechPlain, Name: "bob", Password: "b-secret"}},
	}})
	login := func(user, pass string) *wireClient {
		w := dialBroker(t, c.Addrs()[0], "app")
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, MechPlain
		require.Zero(t, w.request(hs).(*kmsg.SASLHandshakeResponse).ErrorCode)
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = []byte("\x00" + user + "\x00" + pass)
		require.Zero(t, w.request(auth).(*kmsg.SASLAuthenticateResponse).ErrorCode, user)
		return w
	}
	alice, dflt := "alice", ""
	alter := kmsg.NewPtrAlterClientQuotasRequest()
	alter.Entries = []kmsg.AlterClientQuotasRequestEntry{
		quotaEntry(&alice, nil, quotaKeyMutationRate, 1, false),
		quotaEntry(nil, &dflt, quotaKeyMutationRate, 1000, false),
	}
	aw := login("alice", "a-secret")
	for _, e := range aw.request(alter).(*kmsg.AlterClientQuotasResponse).Entries {
		require.Zero(t, e.ErrorCode)
	}
	codes, throttle := createTopicsCodes(aw.request(createTopicsRequest(7, "a", 3, 60)))
	assert.Equal(t, []int16{0, 0, ecThrottlingQuotaExceeded}, codes, "alice: R = 1, B = 100")
	assert.EqualValues(t, 20000, throttle)
	codes, _ = createTopicsCodes(login("bob", "b-secret").request(createTopicsRequest(7, "b", 3, 60)))
	assert.Equal(t, []int16{0, 0, 0}, codes, "bob: the client-id default, R = 1000")
}

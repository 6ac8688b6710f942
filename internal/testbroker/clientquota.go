package testbroker

import (
	"cmp"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quota keys the broker enforces, as AlterClientQuotas and
// DescribeClientQuotas name them. Other keys (consumer_byte_rate,
// request_percentage, ...) are refused with INVALID_REQUEST rather than
// stored and ignored.
const (
	quotaKeyMutationRate     = "controller_mutation_rate" // KIP-599, partition mutations per second
	quotaKeyProducerByteRate = "producer_byte_rate"       // bytes per second
)

// Quota entity types (KIP-546).
const (
	entityUser     = "user"
	entityClientID = "client-id"
)

// entityPart is one component of a quota entity: absent, the default
// (<default> in Kafka's paths, a null name on the wire), or a name.
type entityPart struct {
	set, isDefault bool
	name           string
}

func namedPart(name string) entityPart { return entityPart{set: true, name: name} }

var defaultPart = entityPart{set: true, isDefault: true}

// quotaEntity is a client quota entity: a user, a client id, or both
// (KIP-55).
type quotaEntity struct {
	user, client entityPart
}

// clientQuotas holds the quotas set with AlterClientQuotas.
type clientQuotas struct {
	mu     sync.RWMutex
	values map[quotaEntity]map[string]float64
}

// lookup returns the value of key for the entity.
func (q *clientQuotas) lookup(e quotaEntity, key string) (float64, bool) {
	v, ok := q.values[e][key]
	return v, ok
}

// resolve finds the quota of key for a connection of user and client id,
// with the precedence of Kafka's ClientQuotaManager (most specific first):
//
//  1. /config/users/<user>/clients/<client-id>
//  2. /config/users/<user>/clients/<default>
//  3. /config/users/<user>
//  4. /config/users/<default>/clients/<client-id>
//  5. /config/users/<default>/clients/<default>
//  6. /config/users/<default>
//  7. /config/clients/<client-id>
//  8. /config/clients/<default>
//
// The bucket is shared the way Kafka's quota metric tags group clients:
// by user and client id for levels 1, 2, 4 and 5, by user for 3 and 6, by
// client id for 7 and 8. So a default quota still gives every user (or
// client id) a bucket of its own.
func (q *clientQuotas) resolve(key, user, client string) (rate float64, bucket string, ok bool) {
	u, c := namedPart(user), namedPart(client)
	none := entityPart{}
	levels := [...]struct {
		e            quotaEntity
		byUser, byID bool
	}{
		{quotaEntity{u, c}, true, true},
		{quotaEntity{u, defaultPart}, true, true},
		{quotaEntity{u, none}, true, false},
		{quotaEntity{defaultPart, c}, true, true},
		{quotaEntity{defaultPart, defaultPart}, true, true},
		{quotaEntity{defaultPart, none}, true, false},
		{quotaEntity{none, c}, false, true},
		{quotaEntity{none, defaultPart}, false, true},
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if len(q.values) == 0 {
		return 0, "", false
	}
	for _, l := range levels {
		if v, found := q.lookup(l.e, key); found {
			return v, bucketKey(l.byUser, l.byID, user, client), true
		}
	}
	return 0, "", false
}

// bucketKey names the bucket of a connection at a quota level.
func bucketKey(byUser, byID bool, user, client string) string {
	k := ""
	if byUser {
		k = "user=" + user
	}
	if byID {
		k += "\x00client-id=" + client
	}
	return k
}

// anonymousPrincipal is the user of a connection that did not authenticate,
// as Kafka names it (User:ANONYMOUS); user quotas resolve against it.
const anonymousPrincipal = "ANONYMOUS"

// quotaUser is the connection's user as a quota entity (KIP-55): its SASL
// principal once authenticated, else ANONYMOUS.
func (cn *conn) quotaUser() string {
	if cn.sec.principal != "" {
		return cn.sec.principal
	}
	return anonymousPrincipal
}

// quotaFor returns the limit of quota key for the connection and its
// bucket; ok is false when no quota applies. Quotas set with
// AlterClientQuotas win; Config.MutationRate and Config.ProduceByteRate
// apply to every client id that no entity matches, each client id with its
// own bucket (like Kafka's old static quota.producer.default).
func (c *Cluster) quotaFor(key string, cn *conn) (limit, string, bool) {
	rate, bucket, ok := c.quotas.resolve(key, cn.quotaUser(), cn.clientID)
	var burst float64
	switch {
	case ok && key == quotaKeyMutationRate:
		burst = rate * float64(c.cfg.MutationSamples) * c.cfg.MutationWindow.Seconds()
	case ok:
		burst = rate // one second of the rate
	case key == quotaKeyMutationRate && c.cfg.MutationRate > 0:
		rate, burst = c.cfg.MutationRate, c.cfg.MutationBurst
		bucket, ok = bucketKey(false, true, "", cn.clientID), true
	case key == quotaKeyProducerByteRate && c.cfg.ProduceByteRate > 0:
		rate = float64(c.cfg.ProduceByteRate)
		burst = rate
		bucket, ok = bucketKey(false, true, "", cn.clientID), true
	}
	if !ok || rate <= 0 {
		return limit{}, "", false
	}
	return limit{rate: rate, burst: burst}, bucket, true
}

// parseEntity checks a request's entity: user and client-id components,
// each at most once, a null name meaning the default. Kafka refuses
// anything else with INVALID_REQUEST; the "ip" entity (KIP-612) is not
// served by this broker.
func parseEntity(types []string, names []*string) (quotaEntity, string) {
	var e quotaEntity
	if len(types) == 0 {
		return e, "the entity has no components"
	}
	for i, typ := range types {
		p := defaultPart
		if names[i] != nil {
			p = namedPart(*names[i])
		}
		var dst *entityPart
		switch typ {
		case entityUser:
			dst = &e.user
		case entityClientID:
			dst = &e.client
		default:
			return e, "unsupported entity type " + typ + " (the test broker serves user and client-id)"
		}
		if dst.set {
			return e, "duplicate entity type " + typ
		}
		*dst = p
	}
	return e, ""
}

// handleDescribeClientQuotas lists the entities matching every component
// of the filter (exact name, default, or any) and their quotas; Strict
// leaves out entities with other components too. A bad filter fails the
// whole request with INVALID_REQUEST.
func handleDescribeClientQuotas(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(msg string) result {
		resp.ErrorCode, resp.ErrorMessage = ecInvalidRequest, msgPtr(msg)
		return result{resp: resp}
	}
	seen := map[string]bool{}
	for _, comp := range req.Components {
		if comp.EntityType != entityUser && comp.EntityType != entityClientID {
			return fail("unsupported entity type " + comp.EntityType)
		}
		if seen[comp.EntityType] {
			return fail("duplicate entity type " + comp.EntityType)
		}
		seen[comp.EntityType] = true
		switch comp.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if comp.Match == nil {
				return fail("an exact match needs a name")
			}
		case kmsg.QuotasMatchTypeDefault, kmsg.QuotasMatchTypeAny:
		default:
			return fail("unknown match type")
		}
	}
	q := &cn.c.quotas
	q.mu.RLock()
	defer q.mu.RUnlock()
	for e, vals := range q.values {
		if !matchesFilter(e, req.Components, req.Strict) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range []struct {
			typ  string
			part entityPart
		}{{entityUser, e.user}, {entityClientID, e.client}} {
			if !p.part.set {
				continue
			}
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type = p.typ
			if !p.part.isDefault {
				ent.Name = msgPtr(p.part.name)
			}
			entry.Entity = append(entry.Entity, ent)
		}
		for k, v := range vals {
			val := kmsg.NewDescribeClientQuotasResponseEntryValue()
			val.Key, val.Value = k, v
			entry.Values = append(entry.Values, val)
		}
		slices.SortFunc(entry.Values, func(a, b kmsg.DescribeClientQuotasResponseEntryValue) int { return cmp.Compare(a.Key, b.Key) })
		resp.Entries = append(resp.Entries, entry)
	}
	slices.SortFunc(resp.Entries, func(a, b kmsg.DescribeClientQuotasResponseEntry) int {
		return cmp.Compare(entityString(a.Entity), entityString(b.Entity))
	})
	return result{resp: resp}
}

func entityString(es []kmsg.DescribeClientQuotasResponseEntryEntity) string {
	s := ""
	for _, e := range es {
		name := "<default>"
		if e.Name != nil {
			name = "=" + *e.Name
		}
		s += e.Type + name + ";"
	}
	return s
}

func matchesFilter(e quotaEntity, comps []kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	named := map[string]bool{}
	for _, comp := range comps {
		named[comp.EntityType] = true
		p := e.user
		if comp.EntityType == entityClientID {
			p = e.client
		}
		switch {
		case !p.set:
			return false
		case comp.MatchType == kmsg.QuotasMatchTypeExact && (p.isDefault || p.name != *comp.Match):
			return false
		case comp.MatchType == kmsg.QuotasMatchTypeDefault && !p.isDefault:
			return false
		}
	}
	if strict {
		if e.user.set && !named[entityUser] || e.client.set && !named[entityClientID] {
			return false
		}
	}
	return true
}

// handleAlterClientQuotas sets or removes quotas entity by entity; each
// entry succeeds or fails alone (INVALID_REQUEST for a bad entity, an
// unknown key or a rate that is not positive). ValidateOnly changes
// nothing. A change applies to the next request of every matching
// connection.
func handleAlterClientQuotas(cn *conn, _ *reqHeader, kreq kmsg.Request) result {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	q := &cn.c.quotas
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, entry := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		types := make([]string, len(entry.Entity))
		names := make([]*string, len(entry.Entity))
		for i, ent := range entry.Entity {
			re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: ent.Type, Name: ent.Name})
			types[i], names[i] = ent.Type, ent.Name
		}
		e, msg := parseEntity(types, names)
		if msg == "" {
			msg = validQuotaOps(entry.Ops)
		}
		if msg != "" {
			re.ErrorCode, re.ErrorMessage = ecInvalidRequest, msgPtr(msg)
			resp.Entries = append(resp.Entries, re)
			continue
		}
		if !req.ValidateOnly {
			q.applyLocked(e, entry.Ops)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return result{resp: resp}
}

func validQuotaOps(ops []kmsg.AlterClientQuotasRequestEntryOp) string {
	seen := map[string]bool{}
	for _, op := range ops {
		switch op.Key {
		case quotaKeyMutationRate, quotaKeyProducerByteRate:
		default:
			return "unsupported quota key " + op.Key + " (the test broker enforces " +
				quotaKeyMutationRate + " and " + quotaKeyProducerByteRate + ")"
		}
		if seen[op.Key] {
			return "quota key " + op.Key + " altered twice"
		}
		seen[op.Key] = true
		if !op.Remove && !(op.Value > 0) {
			return "quota " + op.Key + " must be positive"
		}
	}
	return ""
}

func (q *clientQuotas) applyLocked(e quotaEntity, ops []kmsg.AlterClientQuotasRequestEntryOp) {
	if q.values == nil {
		q.values = make(map[quotaEntity]map[string]float64)
	}
	vals := q.values[e]
	for _, op := range ops {
		if op.Remove {
			delete(vals, op.Key)
			continue
		}
		if vals == nil {
			vals = make(map[string]float64)
			q.values[e] = vals
		}
		vals[op.Key] = op.Value
	}
	if len(vals) == 0 {
		delete(q.values, e)
	}
}

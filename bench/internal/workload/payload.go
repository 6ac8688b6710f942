package workload

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// The kinds of values a workload's records carry (Spec.Values).
const (
	// ValuesText is the values of the first peer benchmark: JSON-ish
	// "word":number fields from a 30-word vocabulary, a random number each,
	// about 2× smaller with lz4 (55 B on the wire per 100-byte record).
	ValuesText = "text"
	// ValuesJSON is JSON objects as event streams carry them: the same
	// field names in the same order in every record, most values from
	// small skewed vocabularies, an increasing id and timestamp; about 4×
	// smaller with lz4 (100-byte values) and 8× with zstd (1 KiB values).
	ValuesJSON = "json"
	// ValuesLetters is Java's ProducerPerformance's payload: every byte
	// 'A' + a random number below 26, so lz4 finds nothing to shorten.
	ValuesLetters = "letters"
)

// ValueKinds lists the kinds of values, ValuesText first.
var ValueKinds = []string{ValuesText, ValuesJSON, ValuesLetters}

// The orders in which a keyed workload's records take their keys
// (Spec.KeyOrder).
const (
	// KeysScattered: record i takes key (i × KeyStride) mod Keys, so that
	// consecutive records take keys far apart (the first peer benchmark's
	// order).
	KeysScattered = "scattered"
	// KeysOrdered: record i takes key i mod Keys, keys in order.
	KeysOrdered = "ordered"
	// KeysZipf: record i takes a key drawn from a Zipf distribution over
	// the keys (ZipfS, ZipfV): key 0 the most frequent, then key 1, and so
	// on, as hot keys are in real traffic. The draws are made once, from
	// a fixed seed (ZipfDraws of them, records cycling through them).
	KeysZipf = "zipf"
)

// KeyOrders lists the key orders, KeysScattered first.
var KeyOrders = []string{KeysScattered, KeysOrdered, KeysZipf}

// KeyStride scatters keys: with KeysScattered record i takes key
// (i × KeyStride) mod Keys.
const KeyStride = 7919

// The Zipf distribution of KeysZipf: P(key k) ∝ (ZipfV + k)^-ZipfS.
const (
	ZipfS = 1.1
	ZipfV = 1.0
	// ZipfDraws is the number of draws a Payload holds; record i takes
	// draw i mod ZipfDraws.
	ZipfDraws = 1 << 18
)

// valuePoolSize is the number of distinct values a Payload holds; records
// cycle through them.
const valuePoolSize = 4096

// Payload holds the keys and values of a workload, made once before the
// clock starts so that every client pays nothing to make them. Its slices
// are never written after NewPayload returns, so clients that keep a
// reference until the ack (kgo, sarama, kafka-go) may share them.
type Payload struct {
	keys   [][]byte
	values [][]byte
	// stride is KeyStride (scattered) or 1 (ordered); order, when not
	// empty, is the key index of each draw (zipf) and stride is unused.
	stride int
	order  []int32
	fresh  bool // Spec.FreshValues
}

// words is the vocabulary of ValuesText: text-like, so that lz4 and zstd
// find something to compress (about 2-3x), as in typical JSON or log
// records.
var words = []string{
	"user", "id", "event", "click", "view", "purchase", "session", "time",
	"region", "eu-west", "us-east", "status", "ok", "error", "retry",
	"amount", "currency", "EUR", "USD", "device", "mobile", "desktop",
	"page", "home", "cart", "checkout", "true", "false", "null", "count",
}

// NewPayload makes s's keys and values from fixed seeds: every client, and
// every run, produces the same bytes.
func NewPayload(s Spec) *Payload {
	p := &Payload{values: make([][]byte, valuePoolSize), stride: KeyStride, fresh: s.FreshValues}
	switch s.Values {
	case ValuesJSON:
		fillJSON(p.values, s.ValueSize)
	case ValuesLetters:
		fillLetters(p.values, s.ValueSize)
	default:
		fillText(p.values, s.ValueSize)
	}
	if s.Keys > 0 {
		p.keys = make([][]byte, s.Keys)
		for i := range p.keys {
			p.keys[i] = []byte(fmt.Sprintf("key-%08d", i))
		}
		switch s.KeyOrder {
		case KeysOrdered:
			p.stride = 1
		case KeysZipf:
			p.order = zipfOrder(s.Keys)
		}
	}
	return p
}

// fillText makes ValuesText values (the first peer benchmark's bytes: the
// seed depends on the size only).
func fillText(values [][]byte, size int) {
	rng := rand.New(rand.NewPCG(1, uint64(size)))
	for i := range values {
		v := make([]byte, 0, size+16)
		for len(v) < size {
			v = append(v, '"')
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, '"', ':')
			v = strconv.AppendUint(v, uint64(rng.Uint32()%100000), 10)
			v = append(v, ',')
		}
		values[i] = v[:size:size]
	}
}

// fillLetters makes ValuesLetters values: every byte 'A'+rand(26), as
// Java's ProducerPerformance fills its records.
func fillLetters(values [][]byte, size int) {
	rng := rand.New(rand.NewPCG(3, uint64(size)))
	for i := range values {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte('A' + rng.IntN(26))
		}
		values[i] = v
	}
}

// The vocabularies of ValuesJSON.
var (
	jsonTypes   = []string{"page_view", "click", "add_to_cart", "purchase", "search", "login", "logout", "scroll"}
	jsonPages   = []string{"/", "/home", "/cart", "/checkout", "/search", "/product", "/account", "/help", "/offers", "/orders"}
	jsonRegions = []string{"eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-south-1"}
	jsonDevices = []string{"android", "ios", "web", "desktop"}
	jsonCurr    = []string{"EUR", "USD", "GBP"}
	jsonSKUs    = uint64(500)
)

// fillJSON makes ValuesJSON values: one JSON object per value, exactly
// size bytes (padded with spaces before the closing brace), the fields of
// an e-commerce event stream in a fixed order, each value drawn with the
// skew of real traffic (most events are page views of a few pages, from
// one region, by the most active users). Values that follow each other
// are records that follow each other: the id goes up by one, the
// timestamp by a few milliseconds.
func fillJSON(values [][]byte, size int) {
	rng := rand.New(rand.NewPCG(2, uint64(size)))
	users := rand.NewZipf(rng, 1.2, 1, 99_999)
	skewed := func(list []string) []byte { // item k with probability about 3/4 × 4^-k
		k := 0
		for k < len(list)-1 && rng.IntN(4) == 0 {
			k++
		}
		return jsonString(list[k])
	}
	ts := int64(1_767_225_600_000) // 2026-01-01T00:00:00Z in ms
	for i := range values {
		ts += int64(rng.IntN(4))
		fields := [][]byte{
			jsonField("id", strconv.AppendInt(nil, int64(1_000_000+i), 10)),
			jsonField("ts", strconv.AppendInt(nil, ts, 10)),
			jsonField("type", skewed(jsonTypes)),
			jsonField("user", jsonString(fmt.Sprintf("u%05d", users.Uint64()))),
			jsonField("ok", []byte(strconv.FormatBool(rng.IntN(50) != 0))),
			jsonField("page", skewed(jsonPages)),
			jsonField("region", skewed(jsonRegions)),
			jsonField("device", skewed(jsonDevices)),
			jsonField("ms", strconv.AppendInt(nil, int64(10*(1+rng.IntN(20))), 10)),
			jsonField("currency", skewed(jsonCurr)),
		}
		v := append(make([]byte, 0, size), '{')
		for _, f := range fields {
			if len(v)+len(f)+2 > size { // a comma and the closing brace
				break
			}
			if len(v) > 1 {
				v = append(v, ',')
			}
			v = append(v, f...)
		}
		// Larger values carry the cart: items until the value is full.
		const itemsOpen, itemsClose = `,"items":[`, `]`
		if len(v)+len(itemsOpen)+len(itemsClose)+60 < size {
			v = append(v, itemsOpen...)
			for n := 0; ; n++ {
				item := fmt.Appendf(nil, `{"sku":"SKU-%05d","qty":%d,"price":%d.99}`,
					users.Uint64()%jsonSKUs, 1+rng.IntN(3), 1+rng.IntN(50))
				if len(v)+len(item)+1+len(itemsClose)+1 > size {
					break
				}
				if n > 0 {
					v = append(v, ',')
				}
				v = append(v, item...)
			}
			v = append(v, itemsClose...)
		}
		for len(v) < size-1 {
			v = append(v, ' ')
		}
		values[i] = append(v, '}')[:size:size]
	}
}

func jsonField(name string, value []byte) []byte {
	return append(append(jsonString(name), ':'), value...)
}

func jsonString(s string) []byte { return strconv.AppendQuote(nil, s) }

// zipfOrder draws ZipfDraws key indexes below keys from the Zipf
// distribution of KeysZipf, from a fixed seed.
func zipfOrder(keys int) []int32 {
	rng := rand.New(rand.NewPCG(4, uint64(keys)))
	z := rand.NewZipf(rng, ZipfS, ZipfV, uint64(keys-1))
	order := make([]int32, ZipfDraws)
	for i := range order {
		order[i] = int32(z.Uint64())
	}
	return order
}

// Key returns record i's key, nil for an unkeyed workload, in the
// workload's key order (Spec.KeyOrder).
func (p *Payload) Key(i int) []byte {
	if len(p.keys) == 0 {
		return nil
	}
	if len(p.order) > 0 {
		return p.keys[p.order[i%len(p.order)]]
	}
	return p.keys[(i*p.stride)%len(p.keys)]
}

// Value returns record i's value: with Spec.FreshValues a copy made for
// this call, which the caller may keep.
func (p *Payload) Value(i int) []byte {
	v := p.values[i%len(p.values)]
	if p.fresh {
		return append(make([]byte, 0, len(v)), v...)
	}
	return v
}

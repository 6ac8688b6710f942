package compression_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/samsa-go/samsa/compression"
)

// TestMain fails the package if any test leaves a goroutine behind: no codec
// may start one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var allTypes = []compression.Type{compression.None, compression.Gzip, compression.Snappy, compression.LZ4, compression.Zstd}

// records returns about size bytes of record-like data: JSON events with
// keys, timestamps and a few recurring users, as a producer batches them.
func records(size int) []byte {
	rnd := rand.New(rand.NewPCG(1, 2))
	kinds := []string{"page_view", "click", "add_to_cart", "checkout", "login"}
	var b []byte
	for i := 0; len(b) < size; i++ {
		b = fmt.Appendf(b, `{"id":%d,"ts":%d,"user":"user-%04d","type":%q,"path":"/products/%d","score":%.4f}`+"\n",
			i, 1764420000000+int64(i)*int64(rnd.IntN(50)), rnd.IntN(50), kinds[rnd.IntN(len(kinds))], rnd.IntN(500), rnd.Float64())
	}
	return b[:size]
}

// random returns n incompressible bytes.
func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}

func mustCompressor(tb testing.TB, t compression.Type, level int) *compression.Compressor {
	tb.Helper()
	c, err := compression.NewCompressor(t, level)
	if err != nil {
		tb.Fatalf("NewCompressor(%s, %d): %v", t, level, err)
	}
	return c
}

func mustCompress(tb testing.TB, t compression.Type, src []byte) []byte {
	tb.Helper()
	out, err := mustCompressor(tb, t, 0).AppendCompress(nil, src)
	if err != nil {
		tb.Fatalf("%s: AppendCompress: %v", t, err)
	}
	return out
}

func readVector(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vectors", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Payloads of the codec comparison with the Java client
// (TestCompressionNoWorseThanJava): each value is 1 KiB, every byte drawn
// from a seeded generator, so that every run, and the Java client fed the
// same bytes, sees the same data.
var payloadValues = map[string]func(rnd *rand.Rand, v []byte){
	// Java's ProducerPerformance payload: each byte random.nextInt(26)+65,
	// uppercase letters with no repeats to speak of (entropy 4.7 bits a
	// byte).
	"letters": func(rnd *rand.Rand, v []byte) {
		for i := range v {
			v[i] = byte(rnd.IntN(26) + 'A')
		}
	},
	// JSON events with ids, timestamps, a few recurring names and a random
	// 64-bit session id.
	"json": func(rnd *rand.Rand, v []byte) {
		kinds := []string{"page_view", "click", "add_to_cart", "checkout", "login", "logout", "search"}
		countries := []string{"DE", "FR", "US", "GB", "JP", "BR", "IN"}
		b := v[:0]
		for len(b) < len(v) {
			b = fmt.Appendf(b, `{"id":%d,"ts":%d,"user":"user-%05d","type":%q,"country":%q,"path":"/products/%d","score":%.4f,"session":"%016x"},`,
				rnd.Uint32(), 1764420000000+rnd.Int64N(1e6), rnd.IntN(10000), kinds[rnd.IntN(len(kinds))],
				countries[rnd.IntN(len(countries))], rnd.IntN(5000), rnd.Float64(), rnd.Uint64())
		}
		copy(v, b)
	},
	// Log lines: matches are short (a timestamp's digits, a status code).
	"logs": func(rnd *rand.Rand, v []byte) {
		b := v[:0]
		for len(b) < len(v) {
			b = fmt.Appendf(b, "2025-11-%02d %02d:%02d:%02d.%03d INFO [worker-%d] request id=%08x took %dms status=%d\n",
				1+rnd.IntN(28), rnd.IntN(24), rnd.IntN(60), rnd.IntN(60), rnd.IntN(1000), rnd.IntN(16), rnd.Uint32(),
				rnd.IntN(2000), []int{200, 404, 500}[rnd.IntN(3)])
		}
		copy(v, b)
	},
	// Decimal digits: a small alphabet, only 4- and 5-byte matches.
	"digits": func(rnd *rand.Rand, v []byte) {
		for i := range v {
			v[i] = byte(rnd.IntN(10) + '0')
		}
	},
	// Incompressible bytes.
	"random": func(rnd *rand.Rand, v []byte) {
		for i := range v {
			v[i] = byte(rnd.Uint32())
		}
	},
}

// payloadBatch returns the records section of a batch of n unkeyed records
// with 1 KiB values of the named payload (see payloadValues), as the
// producer writes it.
func payloadBatch(name string, seed uint64, n int) []byte {
	rnd := rand.New(rand.NewPCG(seed, 2))
	fill := payloadValues[name]
	v := make([]byte, 1024)
	var b, rec []byte
	for i := range n {
		fill(rnd, v)
		rec = append(rec[:0], 0)                   // attributes
		rec = binary.AppendVarint(rec, int64(i/8)) // timestamp delta (ms)
		rec = binary.AppendVarint(rec, int64(i))   // offset delta
		rec = binary.AppendVarint(rec, -1)         // null key
		rec = binary.AppendVarint(rec, int64(len(v)))
		rec = append(rec, v...)
		rec = binary.AppendVarint(rec, 0) // no headers
		b = append(binary.AppendVarint(b, int64(len(rec))), rec...)
	}
	return b
}

// w2Batch returns about size bytes of a records section as the producer
// writes it for the benchmarks' W2 workload: unkeyed records whose 100-byte
// values are `"word":number,` pairs drawn from a small vocabulary (as
// bench/internal/workload makes them), each framed as a v2 record.
func w2Batch(size int) []byte {
	rnd := rand.New(rand.NewPCG(1, 100))
	words := []string{"user", "id", "event", "click", "view", "purchase", "session", "time",
		"region", "eu-west", "us-east", "status", "ok", "error", "retry",
		"amount", "currency", "EUR", "USD", "device", "mobile", "desktop",
		"page", "home", "cart", "checkout", "true", "false", "null", "count"}
	values := make([][]byte, 4096)
	for i := range values {
		var v []byte
		for len(v) < 100 {
			v = fmt.Appendf(v, "%q:%d,", words[rnd.IntN(len(words))], rnd.Uint32()%100000)
		}
		values[i] = v[:100]
	}
	var b, rec []byte
	for i := 0; len(b) < size; i++ {
		rec = append(rec[:0], 0)                    // attributes
		rec = binary.AppendVarint(rec, int64(i/50)) // timestamp delta (ms)
		rec = binary.AppendVarint(rec, int64(i))    // offset delta
		rec = binary.AppendVarint(rec, -1)          // null key
		rec = binary.AppendVarint(rec, 100)         // value length
		rec = append(rec, values[i%len(values)]...) // value
		rec = binary.AppendVarint(rec, 0)           // no headers
		b = append(binary.AppendVarint(b, int64(len(rec))), rec...)
	}
	return b[:size]
}

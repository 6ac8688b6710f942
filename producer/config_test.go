package producer

import (
	"context"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/samsa-go/samsa/bufferpool"
	"github.com/samsa-go/samsa/compression"
)

func TestAcks(t *testing.T) {
	cases := []struct {
		acks Acks
		wire int16
		name string
	}{
		{AcksAll, -1, "all"},
		{AcksLeader, 1, "leader"},
		{AcksNone, 0, "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.wire, tc.acks.Wire())
			assert.Equal(t, tc.name, tc.acks.String())
			back, err := ParseAcks(tc.acks.String())
			require.NoError(t, err)
			assert.Equal(t, tc.acks, back, "String round-trips through ParseAcks")
		})
	}
	var zero Acks
	assert.Equal(t, AcksAll, zero, "the zero value is acks=all")
	assert.Equal(t, int16(-1), zero.Wire())
}

// TestParseAcksKeepsJavaMeaning: a user converting Java's acks settings
// must get Java's meaning; acks=0 in particular is none, not the default.
func TestParseAcksKeepsJavaMeaning(t *testing.T) {
	cases := []struct {
		in   string
		want Acks
	}{
		{"all", AcksAll},
		{"ALL", AcksAll},
		{"-1", AcksAll},
		{"1", AcksLeader},
		{" 1 ", AcksLeader},
		{"0", AcksNone},
		{"leader", AcksLeader},
		{"none", AcksNone},
	}
	for _, tc := range cases {
		got, err := ParseAcks(tc.in)
		require.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
		assert.Equal(t, tc.want.Wire(), got.Wire(), "%q", tc.in)
	}
	for _, in := range []string{"", "2", "-2", "one", "al"} {
		_, err := ParseAcks(in)
		assert.Error(t, err, "%q", in)
	}
}

// The zero Config (plus brokers) gets the Java producer's defaults.
func TestConfigDefaults(t *testing.T) {
	c, err := Config{Brokers: []string{"localhost:9092"}}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, "samsa", c.ClientID)
	assert.Equal(t, AcksAll, c.Acks)
	assert.Equal(t, 5*time.Millisecond, c.Linger)
	assert.Equal(t, 16384, c.BatchSize)
	assert.Equal(t, int64(32<<20), c.BufferMemory)
	assert.Equal(t, 60*time.Second, c.MaxBlock)
	assert.Equal(t, 1<<20, c.MaxRequestSize)
	assert.Equal(t, compression.None, c.Compression)
	assert.Equal(t, min(runtime.GOMAXPROCS(0), 4), c.CompressionConcurrency)
	assert.Equal(t, 120*time.Second, c.DeliveryTimeout)
	assert.Equal(t, 30*time.Second, c.RequestTimeout)
	assert.Equal(t, 100*time.Millisecond, c.RetryBackoff)
	assert.Equal(t, time.Second, c.RetryBackoffMax)
	assert.Equal(t, 5, c.MaxInFlight)
	assert.Equal(t, 5*time.Minute, c.MetadataMaxAge)
	assert.Equal(t, 5*time.Minute, c.MetadataMaxIdle)
	assert.False(t, c.DisableIdempotence)
	assert.False(t, c.AutoCreateTopics)
	assert.Equal(t, int32(-1), c.AutoCreatePartitions)
	assert.Equal(t, int16(-1), c.AutoCreateReplicationFactor)
	assert.Equal(t, 10*time.Second, c.DialTimeout)
	assert.Equal(t, 30*time.Second, c.DialTimeoutMax)
	assert.Equal(t, DNSUseAllIPs, c.ClientDNSLookup)
	assert.Zero(t, c.SendBufferBytes, "the operating system's")
	assert.Zero(t, c.ReceiveBufferBytes, "the operating system's")
	assert.Equal(t, DefaultPartitioner(), c.Partitioner)
	require.NotNil(t, c.Logger)
	require.NotNil(t, c.BufferPool)
	assert.Equal(t, int64(32<<20), c.BufferPool.Size())
}

// TestConfigDurationRule: every duration field follows Config's one rule:
// 0 is the default, a positive value is kept, NoWait is "no wait" only in
// Linger, MaxBlock and RetryBackoff, and any other negative value is an
// error naming the field.
func TestConfigDurationRule(t *testing.T) {
	fields := []struct {
		name   string
		field  func(c *Config) *time.Duration
		def    time.Duration
		noWait bool
	}{
		{"Linger", func(c *Config) *time.Duration { return &c.Linger }, 5 * time.Millisecond, true},
		{"MaxBlock", func(c *Config) *time.Duration { return &c.MaxBlock }, 60 * time.Second, true},
		{"RetryBackoff", func(c *Config) *time.Duration { return &c.RetryBackoff }, 100 * time.Millisecond, true},
		{"RetryBackoffMax", func(c *Config) *time.Duration { return &c.RetryBackoffMax }, time.Second, false},
		{"RequestTimeout", func(c *Config) *time.Duration { return &c.RequestTimeout }, 30 * time.Second, false},
		{"DeliveryTimeout", func(c *Config) *time.Duration { return &c.DeliveryTimeout }, 120 * time.Second, false},
		{"MetadataMaxAge", func(c *Config) *time.Duration { return &c.MetadataMaxAge }, 5 * time.Minute, false},
		{"MetadataMaxIdle", func(c *Config) *time.Duration { return &c.MetadataMaxIdle }, 5 * time.Minute, false},
		{"DialTimeout", func(c *Config) *time.Duration { return &c.DialTimeout }, 10 * time.Second, false},
		{"DialTimeoutMax", func(c *Config) *time.Duration { return &c.DialTimeoutMax }, 30 * time.Second, false},
		{"TransactionTimeout", func(c *Config) *time.Duration { return &c.TransactionTimeout }, 60 * time.Second, false},
		{"MetadataRecoveryRebootstrapTrigger", func(c *Config) *time.Duration { return &c.MetadataRecoveryRebootstrapTrigger }, 5 * time.Minute, true},
		{"ConnMaxIdle", func(c *Config) *time.Duration { return &c.ConnMaxIdle }, 9 * time.Minute, false},
		// Default 0: off, as Java's partitioner.availability.timeout.ms.
		{"PartitionerAvailabilityTimeout", func(c *Config) *time.Duration { return &c.PartitionerAvailabilityTimeout }, 0, false},
	}
	never := map[string]bool{"ConnMaxIdle": true} // a negative value means never, kept as given
	// A Config's duration fields, by reflection, must all be in the table.
	var all []string
	rt := reflect.TypeFor[Config]()
	for i := range rt.NumField() {
		if rt.Field(i).Type == reflect.TypeFor[time.Duration]() {
			all = append(all, rt.Field(i).Name)
		}
	}
	var listed []string
	for _, f := range fields {
		listed = append(listed, f.name)
	}
	require.ElementsMatch(t, all, listed, "every duration field of Config is tested")

	const positive = 2 * time.Minute // above every default that bounds another
	for _, f := range fields {
		t.Run(f.name, func(t *testing.T) {
			get := func(d time.Duration) (time.Duration, error) {
				c := Config{Brokers: []string{"b:1"}, DeliveryTimeout: 10 * time.Minute}
				if f.name == "DeliveryTimeout" {
					c.DeliveryTimeout = 0
				}
				*f.field(&c) = d
				out, err := c.withDefaults()
				return *f.field(&out), err
			}
			got, err := get(0)
			require.NoError(t, err)
			assert.Equal(t, f.def, got, "0 means the default")

			got, err = get(positive)
			require.NoError(t, err)
			assert.Equal(t, positive, got, "a positive value is kept")

			if never[f.name] {
				for _, d := range []time.Duration{NoWait, -time.Millisecond, -time.Second} {
					got, err = get(d)
					require.NoError(t, err)
					assert.Equal(t, d, got, "negative means never")
				}
				return
			}
			got, err = get(NoWait)
			if f.noWait {
				require.NoError(t, err)
				assert.Zero(t, got, "NoWait means no wait")
			} else {
				require.ErrorIs(t, err, ErrInvalidConfig)
				assert.Contains(t, err.Error(), f.name+": must not be negative: NoWait is not allowed")
			}

			_, err = get(-time.Second)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), f.name+": must not be negative, got -1s")
		})
	}
}

func TestConfigAdjustments(t *testing.T) {
	cases := []struct {
		name  string
		in    Config
		check func(t *testing.T, c Config)
	}{
		{
			"delivery timeout raised to linger + request timeout",
			Config{Linger: time.Minute, RequestTimeout: 90 * time.Second},
			func(t *testing.T, c Config) { assert.Equal(t, 150*time.Second, c.DeliveryTimeout) },
		},
		{
			"backoff above the default max raises the max",
			Config{RetryBackoff: 5 * time.Second},
			func(t *testing.T, c Config) {
				assert.Equal(t, 5*time.Second, c.RetryBackoff)
				assert.Equal(t, 5*time.Second, c.RetryBackoffMax)
			},
		},
		{
			"explicit max below backoff lowers the backoff (Java)",
			Config{RetryBackoff: 5 * time.Second, RetryBackoffMax: 2 * time.Second},
			func(t *testing.T, c Config) {
				assert.Equal(t, 2*time.Second, c.RetryBackoff)
				assert.Equal(t, 2*time.Second, c.RetryBackoffMax)
			},
		},
		{
			"explicit max below the default backoff",
			Config{RetryBackoffMax: 50 * time.Millisecond},
			func(t *testing.T, c Config) { assert.Equal(t, 50*time.Millisecond, c.RetryBackoff) },
		},
		{
			"acks leader with idempotence disabled",
			Config{Acks: AcksLeader, DisableIdempotence: true, MaxInFlight: 50},
			func(t *testing.T, c Config) {
				assert.Equal(t, AcksLeader, c.Acks)
				assert.Equal(t, 50, c.MaxInFlight)
			},
		},
		{
			"compression level within range",
			Config{Compression: compression.Zstd, CompressionLevel: -5},
			func(t *testing.T, c Config) { assert.Equal(t, -5, c.CompressionLevel) },
		},
		{
			"explicit auto-create settings kept",
			Config{AutoCreateTopics: true, AutoCreatePartitions: 12, AutoCreateReplicationFactor: 3},
			func(t *testing.T, c Config) {
				assert.Equal(t, int32(12), c.AutoCreatePartitions)
				assert.Equal(t, int16(3), c.AutoCreateReplicationFactor)
			},
		},
		{
			"dial timeout above the default max raises the max",
			Config{DialTimeout: time.Minute},
			func(t *testing.T, c Config) {
				assert.Equal(t, time.Minute, c.DialTimeout)
				assert.Equal(t, time.Minute, c.DialTimeoutMax)
			},
		},
		{
			"dial timeout max below the dial timeout lowers it (Java's ExponentialBackoff)",
			Config{DialTimeout: 20 * time.Second, DialTimeoutMax: 5 * time.Second},
			func(t *testing.T, c Config) {
				assert.Equal(t, 5*time.Second, c.DialTimeout)
				assert.Equal(t, 5*time.Second, c.DialTimeoutMax)
			},
		},
		{
			"dial timeout max below the default dial timeout",
			Config{DialTimeoutMax: 3 * time.Second},
			func(t *testing.T, c Config) { assert.Equal(t, 3*time.Second, c.DialTimeout) },
		},
		{
			"canonical bootstrap names and socket buffers kept",
			Config{ClientDNSLookup: DNSResolveCanonicalBootstrapServersOnly, SendBufferBytes: 131072, ReceiveBufferBytes: -1},
			func(t *testing.T, c Config) {
				assert.Equal(t, DNSResolveCanonicalBootstrapServersOnly, c.ClientDNSLookup)
				assert.Equal(t, 131072, c.SendBufferBytes)
				assert.Equal(t, -1, c.ReceiveBufferBytes)
			},
		},
		{
			"ipv6 broker",
			Config{Brokers: []string{"[::1]:9092"}},
			func(t *testing.T, c Config) { assert.Equal(t, []string{"[::1]:9092"}, c.Brokers) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.Brokers == nil {
				tc.in.Brokers = []string{"localhost:9092"}
			}
			c, err := tc.in.withDefaults()
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func TestConfigInvalid(t *testing.T) {
	cases := []struct {
		name string
		in   Config
		want []string // substrings of the error
	}{
		{"no brokers", Config{Brokers: []string{}}, []string{"Brokers: at least one"}},
		{"broker without port", Config{Brokers: []string{"a:1", "localhost"}}, []string{`Brokers[1]: "localhost" is not host:port`}},
		{"broker with bad port", Config{Brokers: []string{"a:http"}}, []string{`Brokers[0]: "a:http" has an invalid port`}},
		{"acks leader with idempotence", Config{Acks: AcksLeader}, []string{"Acks: idempotence requires AcksAll, got leader", "DisableIdempotence"}},
		{"acks none with idempotence", Config{Acks: AcksNone}, []string{"Acks: idempotence requires AcksAll, got none"}},
		{"too many in flight with idempotence", Config{MaxInFlight: 6}, []string{"MaxInFlight: idempotence allows at most 5, got 6", "DisableIdempotence"}},
		{"negative batch size", Config{BatchSize: -1}, []string{"BatchSize: must not be negative"}},
		{"batch larger than memory", Config{BatchSize: 2 << 20, BufferMemory: 1 << 20}, []string{"BatchSize: 2097152 is larger than BufferMemory (1048576)"}},
		{"negative memory", Config{BufferMemory: -1}, []string{"BufferMemory: must not be negative"}},
		{"negative request size", Config{MaxRequestSize: -1}, []string{"MaxRequestSize"}},
		{"unknown codec", Config{Compression: 9}, []string{"Compression: "}},
		{"gzip level", Config{Compression: compression.Gzip, CompressionLevel: 10}, []string{"CompressionLevel: "}},
		{"snappy level", Config{Compression: compression.Snappy, CompressionLevel: 1}, []string{"CompressionLevel: "}},
		{"delivery timeout too short", Config{DeliveryTimeout: 10 * time.Second}, []string{"DeliveryTimeout: 10s is less than Linger + RequestTimeout (5ms + 30s)"}},
		{"negative delivery timeout", Config{DeliveryTimeout: -1}, []string{"DeliveryTimeout: must not be negative"}},
		{"negative request timeout", Config{RequestTimeout: -1}, []string{"RequestTimeout"}},
		{"negative backoff max", Config{RetryBackoffMax: -1}, []string{"RetryBackoffMax"}},
		{"negative in flight", Config{MaxInFlight: -1}, []string{"MaxInFlight: must not be negative"}},
		{"negative compression concurrency", Config{CompressionConcurrency: -1}, []string{"CompressionConcurrency: must not be negative"}},
		{"negative metadata age", Config{MetadataMaxAge: -1}, []string{"MetadataMaxAge"}},
		{"negative metadata idle", Config{MetadataMaxIdle: -1}, []string{"MetadataMaxIdle"}},
		{"bad partitions", Config{AutoCreatePartitions: -2}, []string{"AutoCreatePartitions: must be positive, or -1"}},
		{"bad replication", Config{AutoCreateReplicationFactor: -3}, []string{"AutoCreateReplicationFactor"}},
		{"negative dial timeout", Config{DialTimeout: -1}, []string{"DialTimeout"}},
		{"negative dial timeout max", Config{DialTimeoutMax: -1}, []string{"DialTimeoutMax"}},
		{"unknown DNS lookup", Config{ClientDNSLookup: "default"}, []string{`ClientDNSLookup: "default" is not use_all_dns_ips or resolve_canonical_bootstrap_servers_only`}},
		{"DNS lookup in capitals", Config{ClientDNSLookup: "USE_ALL_DNS_IPS"}, []string{"ClientDNSLookup: "}},
		{"send buffer below -1", Config{SendBufferBytes: -2}, []string{"SendBufferBytes: must be positive, or 0 or -1"}},
		{"receive buffer below -1", Config{ReceiveBufferBytes: -100}, []string{"ReceiveBufferBytes: must be positive, or 0 or -1"}},
		{
			"every problem at once",
			Config{Brokers: []string{}, BatchSize: -1, MaxInFlight: 9},
			[]string{"Brokers:", "BatchSize:", "MaxInFlight:"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.Brokers == nil {
				tc.in.Brokers = []string{"localhost:9092"}
			}
			_, err := tc.in.withDefaults()
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// A user's pool is used as is, and its size is the buffer memory.
func TestConfigUsesGivenBufferPool(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Options{Size: 1 << 20, PooledSize: 4096})
	require.NoError(t, err)
	c, err := Config{Brokers: []string{"b:9092"}, BufferPool: pool, BufferMemory: 5 << 30, BatchSize: 4096}.withDefaults()
	require.NoError(t, err)
	assert.Same(t, pool, c.BufferPool)
	assert.Equal(t, int64(1<<20), c.BufferMemory)
}

// The default pool is sized by BufferMemory and recycles BatchSize buffers.
func TestConfigDefaultPoolSizing(t *testing.T) {
	c, err := Config{Brokers: []string{"b:9092"}, BufferMemory: 1 << 20, BatchSize: 1000}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), c.BufferPool.Size())
	buf := c.BufferPool.TryAllocate(1000)
	require.Len(t, buf, 1000)
	assert.Equal(t, int64(1<<20-1000), c.BufferPool.Available())
	c.BufferPool.Release(buf)
}

// TestStartBatchSize: batches start on a size the pool recycles.
func TestStartBatchSize(t *testing.T) {
	custom, err := bufferpool.New(bufferpool.Options{Size: 4 << 20, PooledSize: 16384, MaxPooledSize: 1 << 20})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"default", Config{}, 512},
		{"large batches", Config{BatchSize: 1 << 20}, 512},
		{"batch of 1000", Config{BatchSize: 1000}, 1000},
		{"batch of 10000", Config{BatchSize: 10000}, 625},
		{"pool recycling 16 KiB", Config{BatchSize: 1 << 20, BufferPool: custom}, 16384},
		{"pool larger than batches", Config{BatchSize: 4096, BufferPool: custom}, 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Brokers = []string{"localhost:9092"}
			cfg, err := tc.cfg.withDefaults()
			require.NoError(t, err)
			require.Equal(t, tc.want, startBatchSize(cfg))
			if tc.cfg.BufferPool == nil {
				require.Equal(t, tc.want, cfg.BufferPool.(*bufferpool.SimplePool).PooledSize(), "the default pool recycles it")
			}
		})
	}
}

// TestRetryBackoffNoWaitWithSmallMax: RetryBackoff NoWait with a
// RetryBackoffMax below the 100ms default is valid (the metadata client
// then backs off 10ms, capped at RetryBackoffMax, not its 100ms default).
func TestRetryBackoffNoWaitWithSmallMax(t *testing.T) {
	for _, tc := range []struct {
		backoff, max, want time.Duration
	}{
		{NoWait, 50 * time.Millisecond, 10 * time.Millisecond},
		{NoWait, 5 * time.Millisecond, 5 * time.Millisecond},
		{200 * time.Millisecond, 0, 200 * time.Millisecond},
	} {
		cfg := Config{Brokers: []string{"127.0.0.1:1"}, RetryBackoff: tc.backoff, RetryBackoffMax: tc.max}
		p, err := New(cfg)
		require.NoError(t, err, "RetryBackoff %v, RetryBackoffMax %v", tc.backoff, tc.max)
		require.Equal(t, tc.want, metadataBackoff(p.cfg))
		require.NoError(t, p.Close(context.Background()))
	}
}

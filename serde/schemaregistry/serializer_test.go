package schemaregistry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sr "github.com/samsa-go/samsa/serde/schemaregistry"
	"github.com/samsa-go/samsa/serde/schemaregistry/internal/fakeregistry"
)

// textCodec is a stand-in codec: the schema text it was built from.
func textCodec(ss sr.SubjectSchema) (string, error) { return ss.Schema.Schema, nil }

func TestRegistrationsPerTopic(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	c := newClient(t, fake)
	r := sr.NewRegistrations[string](c, sr.SerializerConfig{Topics: []string{"a", "b"}})
	require.NoError(t, r.Set(ctx, sr.Schema{Schema: orderV1}, "shop.Order", textCodec))

	assert.Equal(t, []string{"a", "b"}, r.Topics())
	assert.Len(t, fake.Versions("a-value"), 1)
	assert.Len(t, fake.Versions("b-value"), 1)
	reg, err := r.Get("a")
	require.NoError(t, err)
	assert.Equal(t, "a-value", reg.Subject)
	assert.Equal(t, orderV1, reg.Codec)
	assert.Equal(t, sr.AppendHeader(nil, reg.ID), reg.Header)

	_, err = r.Get("c")
	require.ErrorIs(t, err, sr.ErrTopicNotRegistered)
	assert.Contains(t, err.Error(), `"c"`)

	before := len(fake.Requests())
	require.NoError(t, r.Add(ctx, "c"))
	assert.Len(t, fake.Requests(), before+1, "Add registers only the new topic")
	_, err = r.Get("c")
	require.NoError(t, err)

	// Get is what Serialize calls: no allocation, no request.
	before = len(fake.Requests())
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := r.Get("b"); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	assert.Len(t, fake.Requests(), before)
}

func TestRegistrationsSetReplacesAtOnce(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	c := newClient(t, fake)
	r := sr.NewRegistrations[string](c, sr.SerializerConfig{Topics: []string{"a"}})
	require.NoError(t, r.Set(ctx, sr.Schema{Schema: orderV1}, "", textCodec))
	require.NoError(t, r.Add(ctx, "b"))

	// A new schema is registered for every topic known, then swapped in.
	require.NoError(t, r.Set(ctx, sr.Schema{Schema: orderV2}, "", textCodec))
	for _, topic := range []string{"a", "b"} {
		reg, err := r.Get(topic)
		require.NoError(t, err)
		assert.Equal(t, orderV2, reg.Codec)
	}

	// A failed Set changes nothing.
	fake.Compatible = func(string, string, []fakeregistry.Schema, fakeregistry.Schema) bool { return false }
	err := r.Set(ctx, sr.Schema{Schema: orderV1 + " "}, "", textCodec)
	var se *sr.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 409, se.StatusCode)
	reg, err := r.Get("a")
	require.NoError(t, err)
	assert.Equal(t, orderV2, reg.Codec)

	// A codec that cannot be built fails Set too.
	err = r.Set(ctx, sr.Schema{Schema: orderV2}, "", func(sr.SubjectSchema) (string, error) { return "", errors.New("unbuildable") })
	require.ErrorContains(t, err, "unbuildable")
}

func TestRegistrationsStrategies(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		cfg      sr.SerializerConfig
		subjects []string
	}{
		{"topic, value", sr.SerializerConfig{Topics: []string{"t1", "t2"}}, []string{"t1-value", "t2-value"}},
		{"topic, key", sr.SerializerConfig{IsKey: true, Topics: []string{"t1"}}, []string{"t1-key"}},
		{"record", sr.SerializerConfig{SubjectNameStrategy: sr.RecordNameStrategy}, []string{"shop.Order"}},
		{"topic record", sr.SerializerConfig{SubjectNameStrategy: sr.TopicRecordNameStrategy, Topics: []string{"t1", "t2"}}, []string{"t1-shop.Order", "t2-shop.Order"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeregistry.New(t)
			c := newClient(t, fake)
			r := sr.NewRegistrations[string](c, tc.cfg)
			require.NoError(t, r.Set(ctx, sr.Schema{Schema: orderV1}, "shop.Order", textCodec))
			subjects, err := c.Subjects(ctx)
			require.NoError(t, err)
			assert.Equal(t, tc.subjects, subjects)
			reg, err := r.Get("any-topic-at-all")
			if tc.cfg.SubjectNameStrategy == sr.RecordNameStrategy {
				require.NoError(t, err, "one subject serves every topic")
				assert.Equal(t, "shop.Order", reg.Subject)
			} else {
				require.ErrorIs(t, err, sr.ErrTopicNotRegistered)
			}
		})
	}
}

func TestRegistrationsConfigErrors(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	c := newClient(t, fake)
	err := sr.NewRegistrations[string](c, sr.SerializerConfig{}).Set(ctx, sr.Schema{Schema: orderV1}, "", textCodec)
	assert.ErrorIs(t, err, sr.ErrInvalidConfig, "TopicNameStrategy without topics")
	err = sr.NewRegistrations[string](c, sr.SerializerConfig{SubjectNameStrategy: sr.RecordNameStrategy}).Set(ctx, sr.Schema{Schema: `"string"`}, "", textCodec)
	assert.ErrorIs(t, err, sr.ErrNoRecordName)
	assert.Empty(t, fake.Requests())
}

func TestResolveSchemaModes(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	c := newClient(t, fake)
	idV1, err := c.Register(ctx, "t-value", sr.Schema{Schema: orderV1}, false)
	require.NoError(t, err)
	idV2, err := c.Register(ctx, "t-value", sr.Schema{Schema: orderV2}, false)
	require.NoError(t, err)

	fresh := newClient(t, fake)
	// auto.register.schemas=false: looked up, never registered.
	got, err := fresh.ResolveSchema(ctx, "t-value", sr.Schema{Schema: orderV1}, sr.SerializerConfig{DisableAutoRegister: true})
	require.NoError(t, err)
	assert.Equal(t, idV1, got.ID)
	assert.Equal(t, 1, got.Version)
	_, err = fresh.ResolveSchema(ctx, "t-value", sr.Schema{Schema: `"string"`}, sr.SerializerConfig{DisableAutoRegister: true})
	assert.True(t, sr.IsNotFound(err), "%v", err)
	assert.Len(t, fake.Versions("t-value"), 2)

	// use.latest.version: the latest, whatever the schema given.
	got, err = fresh.ResolveSchema(ctx, "t-value", sr.Schema{Schema: orderV1}, sr.SerializerConfig{UseLatestVersion: true, DisableAutoRegister: true})
	require.NoError(t, err)
	assert.Equal(t, idV2, got.ID)
	assert.Equal(t, orderV2, got.Schema.Schema)
}

func TestDecodersFetchOncePerID(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	id, err := newClient(t, fake).Register(ctx, "t-value", sr.Schema{Schema: orderV1}, false)
	require.NoError(t, err)
	c := newClient(t, fake)
	builds := 0
	d := sr.NewDecoders(c, func(_ context.Context, s sr.Schema) (string, error) { builds++; return s.Schema, nil })
	for range 3 {
		got, err := d.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, orderV1, got)
	}
	assert.Equal(t, 1, builds)
	assert.Equal(t, 1, fake.Count("GET", fmt.Sprintf("/schemas/ids/%d", id)))
	_, err = d.Get(ctx, 4242)
	assert.True(t, sr.IsNotFound(err))
}

func TestReferencesInDependencyOrder(t *testing.T) {
	ctx := context.Background()
	fake := fakeregistry.New(t)
	c := newClient(t, fake)
	_, err := c.Register(ctx, "money", sr.Schema{Schema: `{"type":"fixed","name":"Money","size":8}`}, false)
	require.NoError(t, err)
	_, err = c.Register(ctx, "line", sr.Schema{Schema: `{"type":"record","name":"Line","fields":[{"name":"m","type":"Money"}]}`,
		References: []sr.Reference{{Name: "Money", Subject: "money", Version: 1}}}, false)
	require.NoError(t, err)
	top := sr.Schema{Schema: "...", References: []sr.Reference{
		{Name: "Line", Subject: "line", Version: 1},
		{Name: "Money", Subject: "money", Version: 1},
	}}
	refs, err := c.References(ctx, top)
	require.NoError(t, err)
	var names []string
	for _, r := range refs {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{"Money", "Line"}, names, "each once, a dependency before its dependents")

	_, err = c.References(ctx, sr.Schema{References: []sr.Reference{{Name: "X", Subject: "missing", Version: 1}}})
	assert.True(t, sr.IsNotFound(err))
	assert.Contains(t, err.Error(), `reference "X"`)
}

package schemaregistry_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sr "github.com/samsa-go/samsa/serde/schemaregistry"
)

func TestSubjectNameStrategies(t *testing.T) {
	cases := []struct {
		s      sr.SubjectNameStrategy
		topic  string
		isKey  bool
		record string
		want   string
	}{
		{sr.TopicNameStrategy, "orders", false, "shop.Order", "orders-value"},
		{sr.TopicNameStrategy, "orders", true, "shop.Order", "orders-key"},
		{sr.TopicNameStrategy, "orders", false, "", "orders-value"},
		{sr.RecordNameStrategy, "orders", false, "shop.Order", "shop.Order"},
		{sr.RecordNameStrategy, "other", true, "shop.Order", "shop.Order"},
		{sr.TopicRecordNameStrategy, "orders", false, "shop.Order", "orders-shop.Order"},
		{sr.TopicRecordNameStrategy, "orders", true, "shop.Order", "orders-shop.Order"},
	}
	for _, tc := range cases {
		got, err := tc.s.Subject(tc.topic, tc.isKey, tc.record)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%v", tc.s)
	}
	for _, s := range []sr.SubjectNameStrategy{sr.RecordNameStrategy, sr.TopicRecordNameStrategy} {
		_, err := s.Subject("orders", false, "")
		assert.ErrorIs(t, err, sr.ErrNoRecordName)
	}
	assert.True(t, sr.TopicNameStrategy.UsesTopic())
	assert.True(t, sr.TopicRecordNameStrategy.UsesTopic())
	assert.False(t, sr.RecordNameStrategy.UsesTopic())
}

func TestParseSubjectNameStrategy(t *testing.T) {
	cases := []struct {
		in   string
		want sr.SubjectNameStrategy
	}{
		{"io.confluent.kafka.serializers.subject.TopicNameStrategy", sr.TopicNameStrategy},
		{"io.confluent.kafka.serializers.subject.RecordNameStrategy", sr.RecordNameStrategy},
		{"io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", sr.TopicRecordNameStrategy},
		{"io.confluent.kafka.serializers.subject.strategy.TopicNameStrategy", sr.TopicNameStrategy},
		{" RecordNameStrategy ", sr.RecordNameStrategy},
	}
	for _, tc := range cases {
		got, err := sr.ParseSubjectNameStrategy(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		back, err := sr.ParseSubjectNameStrategy(got.String())
		require.NoError(t, err)
		assert.Equal(t, got, back)
	}
	for _, in := range []string{"", "com.example.MyStrategy", "topicnamestrategy"} {
		_, err := sr.ParseSubjectNameStrategy(in)
		assert.Error(t, err, in)
	}
}

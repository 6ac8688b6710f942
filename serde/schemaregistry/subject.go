package schemaregistry

import (
	"errors"
	"fmt"
	"strings"
)

// SubjectNameStrategy is how a serializer names the subject it registers
// a schema under, as the Java serializers' key.subject.name.strategy and
// value.subject.name.strategy classes do. The zero value is
// TopicNameStrategy, Java's default.
type SubjectNameStrategy int

const (
	// TopicNameStrategy names the subject after the topic: "<topic>-key"
	// for keys, "<topic>-value" for values. Every record of a topic then
	// has one schema (or its compatible versions).
	// io.confluent.kafka.serializers.subject.TopicNameStrategy.
	TopicNameStrategy SubjectNameStrategy = iota
	// RecordNameStrategy names the subject after the record type, the
	// same for every topic: the Avro record's full name, the Protobuf
	// message's full name, or the JSON Schema's "title".
	// io.confluent.kafka.serializers.subject.RecordNameStrategy.
	RecordNameStrategy
	// TopicRecordNameStrategy names the subject "<topic>-<record name>".
	// io.confluent.kafka.serializers.subject.TopicRecordNameStrategy.
	TopicRecordNameStrategy
)

const javaStrategyPackage = "io.confluent.kafka.serializers.subject."

var strategyNames = [...]string{"TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"}

// String returns the strategy's Java class name.
func (s SubjectNameStrategy) String() string {
	if s < 0 || int(s) >= len(strategyNames) {
		return fmt.Sprintf("SubjectNameStrategy(%d)", int(s))
	}
	return javaStrategyPackage + strategyNames[s]
}

// UsesTopic reports whether the subject depends on the topic, so that a
// serializer needs a schema id per topic.
func (s SubjectNameStrategy) UsesTopic() bool { return s != RecordNameStrategy }

// ErrNoRecordName is returned by Subject for RecordNameStrategy and
// TopicRecordNameStrategy when the schema names no record: an Avro schema
// that is not a named type, or a JSON Schema without "title".
var ErrNoRecordName = errors.New("schemaregistry: the schema has no record name for a record name strategy")

// Subject returns the subject for a record of topic (a key when isKey)
// whose schema names recordName. A record name strategy without a record
// name returns ErrNoRecordName.
func (s SubjectNameStrategy) Subject(topic string, isKey bool, recordName string) (string, error) {
	switch s {
	case TopicNameStrategy:
		if isKey {
			return topic + "-key", nil
		}
		return topic + "-value", nil
	case RecordNameStrategy, TopicRecordNameStrategy:
		if recordName == "" {
			return "", ErrNoRecordName
		}
		if s == RecordNameStrategy {
			return recordName, nil
		}
		return topic + "-" + recordName, nil
	}
	return "", fmt.Errorf("schemaregistry: unknown %v", s)
}

// ParseSubjectNameStrategy reads a Java strategy class name, with or
// without its package (io.confluent.kafka.serializers.subject.), as
// key.subject.name.strategy and value.subject.name.strategy give it. The
// deprecated io.confluent.kafka.serializers.subject.strategy package of
// the same names is accepted too.
func ParseSubjectNameStrategy(name string) (SubjectNameStrategy, error) {
	short := strings.TrimSpace(name)
	for _, p := range []string{javaStrategyPackage + "strategy.", javaStrategyPackage} {
		if rest, ok := strings.CutPrefix(short, p); ok {
			short = rest
			break
		}
	}
	for i, n := range strategyNames {
		if short == n {
			return SubjectNameStrategy(i), nil
		}
	}
	return 0, fmt.Errorf("schemaregistry: %q is not TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy", name)
}

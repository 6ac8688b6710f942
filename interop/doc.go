// Package interop holds tests of samsa's components against other Kafka
// implementations: franz-go's kgo client and kfake broker, and librdkafka
// through kcat. It is a module of its own so that those dependencies never
// reach the library's users.
package interop

package telemetry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// MetricsData is a decoded OTLP MetricsData, as far as client metrics
// use it: what Decode returns, for the test broker and tests.
type MetricsData struct {
	Resources []ResourceMetrics
}

// ResourceMetrics is one resource's metrics.
type ResourceMetrics struct {
	Attributes []KeyValue // the resource's string attributes
	Scopes     []ScopeMetrics
}

// ScopeMetrics is one instrumentation scope's metrics.
type ScopeMetrics struct {
	Name, Version string
	Metrics       []Metric
}

// Metric is a Gauge or a Sum.
type Metric struct {
	Name string
	Kind Kind // Gauge, DeltaSum or CumulativeSum
	// Monotonic is a Sum's is_monotonic.
	Monotonic bool
	Points    []Point
}

// Point is a NumberDataPoint.
type Point struct {
	Attributes  []KeyValue
	Start, Time int64 // Unix nanoseconds; Start 0 when absent
	Value       float64
}

// All returns every metric of every resource and scope, in order.
func (d *MetricsData) All() []Metric {
	var out []Metric
	for _, r := range d.Resources {
		for _, s := range r.Scopes {
			out = append(out, s.Metrics...)
		}
	}
	return out
}

// errMalformed is wrapped by Decode's errors.
var errMalformed = errors.New("telemetry: malformed OTLP MetricsData")

// Decode parses an OTLP MetricsData in protobuf's wire format. Fields it
// does not know are skipped; a Metric other than a Gauge or a Sum (a
// histogram, a summary) is decoded without points. Integer points
// (as_int) are returned as float64.
func Decode(b []byte) (MetricsData, error) {
	var d MetricsData
	err := fields(b, func(f pbField) error {
		if f.num != fMetricsDataResourceMetrics || f.wire != wireBytes {
			return nil
		}
		r, err := decodeResource(f.b)
		d.Resources = append(d.Resources, r)
		return err
	})
	return d, err
}

func decodeResource(b []byte) (ResourceMetrics, error) {
	var r ResourceMetrics
	err := fields(b, func(f pbField) error {
		if f.wire != wireBytes {
			return nil
		}
		switch f.num {
		case fResourceMetricsResource:
			return fields(f.b, func(a pbField) error {
				if a.num != fResourceAttributes || a.wire != wireBytes {
					return nil
				}
				kv, err := decodeKeyValue(a.b)
				r.Attributes = append(r.Attributes, kv)
				return err
			})
		case fResourceMetricsScope:
			s, err := decodeScope(f.b)
			r.Scopes = append(r.Scopes, s)
			return err
		}
		return nil
	})
	return r, err
}

func decodeScope(b []byte) (ScopeMetrics, error) {
	var s ScopeMetrics
	err := fields(b, func(f pbField) error {
		if f.wire != wireBytes {
			return nil
		}
		switch f.num {
		case fScopeMetricsScope:
			return fields(f.b, func(g pbField) error {
				switch {
				case g.num == fScopeName && g.wire == wireBytes:
					s.Name = string(g.b)
				case g.num == fScopeVersion && g.wire == wireBytes:
					s.Version = string(g.b)
				}
				return nil
			})
		case fScopeMetricsMetrics:
			m, err := decodeMetric(f.b)
			s.Metrics = append(s.Metrics, m)
			return err
		}
		return nil
	})
	return s, err
}

func decodeMetric(b []byte) (Metric, error) {
	var m Metric
	err := fields(b, func(f pbField) error {
		switch {
		case f.num == fMetricName && f.wire == wireBytes:
			m.Name = string(f.b)
		case f.num == fMetricGauge && f.wire == wireBytes:
			m.Kind = Gauge
			return decodePoints(f.b, &m)
		case f.num == fMetricSum && f.wire == wireBytes:
			m.Kind = CumulativeSum
			return decodePoints(f.b, &m)
		}
		return nil
	})
	return m, err
}

// decodePoints reads a Gauge's or a Sum's fields into m.
func decodePoints(b []byte, m *Metric) error {
	return fields(b, func(f pbField) error {
		switch {
		case f.num == fGaugePoints && f.wire == wireBytes:
			p, err := decodePoint(f.b)
			m.Points = append(m.Points, p)
			return err
		case f.num == fSumTemporality && f.wire == wireVarint && m.Kind != Gauge:
			if f.n == temporalityDelta {
				m.Kind = DeltaSum
			}
		case f.num == fSumMonotonic && f.wire == wireVarint:
			m.Monotonic = f.n != 0
		}
		return nil
	})
}

const fPointInt = 6 // NumberDataPoint.as_int (sfixed64)

func decodePoint(b []byte) (Point, error) {
	var p Point
	err := fields(b, func(f pbField) error {
		switch {
		case f.num == fPointAttributes && f.wire == wireBytes:
			kv, err := decodeKeyValue(f.b)
			p.Attributes = append(p.Attributes, kv)
			return err
		case f.num == fPointStart && f.wire == wireFixed64:
			p.Start = int64(f.n)
		case f.num == fPointTime && f.wire == wireFixed64:
			p.Time = int64(f.n)
		case f.num == fPointDouble && f.wire == wireFixed64:
			p.Value = math.Float64frombits(f.n)
		case f.num == fPointInt && f.wire == wireFixed64:
			p.Value = float64(int64(f.n))
		}
		return nil
	})
	return p, err
}

// decodeKeyValue reads a KeyValue whose value is a string (other values
// come back as "").
func decodeKeyValue(b []byte) (KeyValue, error) {
	var kv KeyValue
	err := fields(b, func(f pbField) error {
		switch {
		case f.num == fKeyValueKey && f.wire == wireBytes:
			kv.Key = string(f.b)
		case f.num == fKeyValueValue && f.wire == wireBytes:
			return fields(f.b, func(v pbField) error {
				if v.num == fAnyString && v.wire == wireBytes {
					kv.Value = string(v.b)
				}
				return nil
			})
		}
		return nil
	})
	return kv, err
}

// pbField is one field of a protobuf message: a varint or fixed value in
// n, a length-delimited one in b.
type pbField struct {
	num, wire int
	n         uint64
	b         []byte
}

// fields calls fn with each field of the message b, in order.
func fields(b []byte, fn func(pbField) error) error {
	for len(b) > 0 {
		tag, l := binary.Uvarint(b)
		if l <= 0 || tag>>3 == 0 {
			return fmt.Errorf("%w: bad tag", errMalformed)
		}
		b = b[l:]
		f := pbField{num: int(tag >> 3), wire: int(tag & 7)}
		switch f.wire {
		case wireVarint:
			if f.n, l = binary.Uvarint(b); l <= 0 {
				return fmt.Errorf("%w: bad varint", errMalformed)
			}
			b = b[l:]
		case wireFixed64:
			if len(b) < 8 {
				return fmt.Errorf("%w: truncated fixed64", errMalformed)
			}
			f.n, b = binary.LittleEndian.Uint64(b), b[8:]
		case wireBytes:
			n, l := binary.Uvarint(b)
			if l <= 0 || n > uint64(len(b)-l) {
				return fmt.Errorf("%w: bad length", errMalformed)
			}
			f.b, b = b[l:l+int(n)], b[l+int(n):]
		case 5: // fixed32
			if len(b) < 4 {
				return fmt.Errorf("%w: truncated fixed32", errMalformed)
			}
			f.n, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		default:
			return fmt.Errorf("%w: wire type %d", errMalformed, f.wire)
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

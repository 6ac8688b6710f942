package samsaprom_test

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/samsa-go/samsa/observe/samsaprom"
	"github.com/samsa-go/samsa/producer"
)

type snapshot producer.Metrics

func (s snapshot) Metrics() producer.Metrics { return producer.Metrics(s) }

// A collector per producer, registered with a registry that an HTTP
// handler serves. With a real producer, pass the *producer.Producer.
func ExampleNewCollector() {
	var src samsaprom.Source = snapshot{Producer: producer.ProducerMetrics{RecordSendTotal: 3}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(samsaprom.NewCollector(src, samsaprom.WithMaxTopics(50)))
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "samsa_producer_record_send_total" {
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output: samsa_producer_record_send_total 3
}

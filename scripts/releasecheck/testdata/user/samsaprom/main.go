// A user's program of the observe/samsaprom module, built by
// scripts/release-check.sh from the published modules.
package main

import (
	"context"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/samsa-go/samsa/observe/samsaprom"
	"github.com/samsa-go/samsa/producer"
)

func main() {
	p, err := producer.New(producer.Config{Brokers: []string{"127.0.0.1:9092"}})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	reg := prometheus.NewRegistry()
	reg.MustRegister(samsaprom.NewCollector(p, samsaprom.WithMaxTopics(50)))
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	log.Print(http.ListenAndServe("127.0.0.1:9100", nil))
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"refuel/workflows/inference"

	"go.temporal.io/sdk/client"

	"refuel/jobs"
	"refuel/pkg/autoscale"
	"refuel/pkg/loadgen"
	"refuel/pkg/spec"
)

// The demo's inference service: its spec, the real requests it sends to the
// service's endpoint, and the replica the cloud takes back under load.

// demoService is the demo's service: the demo model server (this
// binary's sibling bin/worker, as on the joined machines, which share
// this host) behind its balancer, or, where that binary is not there, a
// service of capacity alone whose load is reported as numbers.
func demoService(id string, out io.Writer) spec.ServiceSpec {
	svc := spec.ServiceSpec{
		ID: id, Team: "serving", Priority: 90, MinReplicas: 1, MaxReplicas: 5,
		Target: spec.ScalingTarget{QPS: 10}, UpscaleDelay: spec.Duration(5 * time.Second), DownscaleDelay: spec.Duration(20 * time.Second),
		Placement: spec.PlacementSpotFirst,
	}
	self, err := os.Executable()
	worker := filepath.Join(filepath.Dir(self), "worker")
	if _, serr := os.Stat(worker); err != nil || serr != nil {
		fmt.Fprintf(out, "no %s beside this starter: the service holds capacity alone and its load is sent as numbers\n", worker)
		svc.ModelLoad = spec.Duration(5 * time.Second)
		return svc
	}
	svc.Command = []string{worker, "model-server", "--load-delay", "3s", "--tokens-per-second", "200"}
	svc.MaxConcurrency = 8
	svc.SLO = &spec.SLO{Latency: spec.Duration(2 * time.Second)}
	svc.DrainTimeout = spec.Duration(10 * time.Second)
	svc.Normalize()
	return svc
}

// reclaimableReplica is the instance of a ready replica on a public
// cloud, spot first, and its market; "" if none.
func (d *demoRun) reclaimableReplica() (id, market string) {
	for _, r := range d.svc.Replicas {
		if r.State != inference.ReplicaReady || r.Instance == nil || r.Instance.Market == "base" {
			continue
		}
		if id == "" || (r.Instance.Market == "spot" && market != "spot") {
			id, market = r.Instance.ID, r.Instance.Market
		}
	}
	return id, market
}

// holds reports whether a replica of the service is on instance id.
func (d *demoRun) holds(id string) bool {
	for _, r := range d.svc.Replicas {
		if r.Instance != nil && r.Instance.ID == id {
			return true
		}
	}
	return false
}

// demoLoad sends the service the load a traffic generator would see: real
// requests to its endpoint at the rate set, or, for a service of capacity
// alone, the rate as numbers.
type demoLoad struct {
	serving bool
	slo     time.Duration

	mu    sync.Mutex
	qps   float64
	stats loadgen.Stats // since the last report
}

func (l *demoLoad) set(qps float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.qps = qps
}

func (l *demoLoad) drive(ctx context.Context, c client.Client, id string, endpoint func() string) {
	const every = 2 * time.Second
	client := loadgen.NewClient(30 * time.Second)
	for ctx.Err() == nil {
		l.mu.Lock()
		qps := l.qps
		l.mu.Unlock()
		if !l.serving {
			_ = jobs.ReportLoad(ctx, c, id, autoscale.Metrics{At: time.Now(), QPS: qps})
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
			continue
		}
		ep := endpoint()
		if ep == "" {
			select {
			case <-ctx.Done():
			case <-time.After(every / 4):
			}
			continue
		}
		st := loadgen.Run(ctx, loadgen.Config{
			URL: "http://" + ep + "/v1/completions", Arrivals: loadgen.Poisson(qps, every, loadgen.SmallBody, uint64(time.Now().UnixNano())),
			SLO: l.slo, Client: client,
		})
		l.mu.Lock()
		l.stats = l.stats.Add(st)
		l.mu.Unlock()
	}
}

// report prints the requests answered since the last report.
func (l *demoLoad) report(out io.Writer, during string) {
	if !l.serving {
		return
	}
	l.mu.Lock()
	st := l.stats
	l.stats = loadgen.Stats{}
	l.mu.Unlock()
	fmt.Fprintf(out, "requests through the endpoint during %s: %d sent, %d answered, %d failed; latency p50 %s p99 %s; %.1f%% within the %s SLO\n",
		during, st.Sent, st.OK, st.Failed, st.P50.Round(time.Millisecond), st.P99.Round(time.Millisecond), 100*st.SLOShare(), l.slo)
}

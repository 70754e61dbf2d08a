package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/pkg/cost"
)

func newTestMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := NewMetrics(zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func TestTimersOfTheCatalogueAreHistogramsWithTheirBuckets(t *testing.T) {
	m := newTestMetrics(t)
	o := capacity.Offering{Provider: "sim", Market: capacity.Spot, Zone: "us-west-2a", InstanceType: "p3.2xlarge"}
	// The SDK adds tags of its own (namespace, workflow type): they are
	// not labels of refuel's metrics.
	h := m.Handler.WithTags(map[string]string{"namespace": "default", "workflow_type": "TrainingRun"})
	ObserveRecovery(h, o, 7*time.Second)
	ObserveRecovery(h, o, 40*time.Second)

	want := `
# HELP refuel_recovery_seconds Time from a preemption (its notice, or its detection) to training resumed on a replacement.
# TYPE refuel_recovery_seconds histogram
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="1"} 0
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="2.5"} 0
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="5"} 0
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="10"} 1
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="20"} 1
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="30"} 1
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="60"} 2
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="120"} 2
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="300"} 2
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="600"} 2
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="1800"} 2
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="3600"} 2
refuel_recovery_seconds_bucket{cloud="sim",market="spot",provider="sim",zone="us-west-2a",le="+Inf"} 2
refuel_recovery_seconds_sum{cloud="sim",market="spot",provider="sim",zone="us-west-2a"} 47
refuel_recovery_seconds_count{cloud="sim",market="spot",provider="sim",zone="us-west-2a"} 2
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), RecoverySeconds); err != nil {
		t.Error(err)
	}
}

func TestCostIsCountedInDollarsWhenASegmentCloses(t *testing.T) {
	m := newTestMetrics(t)
	start := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	seg := cost.Segment{InstanceID: "i-1", Pool: "burst-v100", Market: "spot", Offering: "sim/p3.2xlarge/us-west-2a/spot", PricePerHour: 0.9701, Start: start}
	CountCost(m.Handler, "nlp", seg) // open: nothing yet
	seg.End = start.Add(2 * time.Hour)
	CountCost(m.Handler, "nlp", seg)
	gce := cost.Segment{InstanceID: "g-1", Pool: "burst-h100", Market: "spot", Offering: "gce/a3-highgpu-1g/us-central1-a/spot", PricePerHour: 2.3724, Start: start, End: start.Add(time.Hour)}
	CountCost(m.Handler, "nlp", gce)
	base := cost.Segment{InstanceID: "b-1", Pool: "base", Market: "base", Offering: "base/p3.2xlarge/dc-1/base", PricePerHour: 1.5, Start: start, End: start.Add(time.Hour)}
	var l cost.Ledger
	l.Open(base)
	l.Segments[0].End = time.Time{}
	l.Close("b-1", start.Add(time.Hour))
	CountClosedCost(m.Handler, "nlp", l, "b-1", start.Add(time.Hour))
	CountClosedCost(m.Handler, "nlp", l, "b-1", start.Add(2*time.Hour)) // not closed then: nothing

	want := `
# HELP refuel_cost_usd_total Instance time paid for, in US dollars, counted when a ledger segment closes.
# TYPE refuel_cost_usd_total counter
refuel_cost_usd_total{cloud="base",layer="base",market="base",pool="base",provider="base",team="nlp"} 1.5
refuel_cost_usd_total{cloud="gce",layer="burst",market="spot",pool="burst-h100",provider="gce",team="nlp"} 2.3724
refuel_cost_usd_total{cloud="sim",layer="burst",market="spot",pool="burst-v100",provider="sim",team="nlp"} 1.9402
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), CostUSDTotal); err != nil {
		t.Error(err)
	}
}

func TestTheSDKsOwnMetricsStillReachTheRegistry(t *testing.T) {
	m := newTestMetrics(t)
	m.Handler.WithTags(map[string]string{"namespace": "default"}).Counter("temporal_request").Inc(3)
	m.Handler.Gauge("temporal_worker_task_slots_available").Update(5)
	_ = m.Close() // flushes tally's reporter
	got, err := testutil.GatherAndCount(m.Registry, "temporal_request", "temporal_worker_task_slots_available")
	if err != nil || got != 2 {
		t.Errorf("SDK metrics gathered: %d series, %v; want both", got, err)
	}
}

func TestANegativeIncrementIsDroppedNotAPanic(t *testing.T) {
	m := newTestMetrics(t)
	m.Handler.Counter(CheckpointsTotal).Inc(-1)
	m.Handler.Counter(CheckpointsTotal).Inc(2)
	if n := testutil.ToFloat64(m.Handler.(handler).vecs.counters[CheckpointsTotal].WithLabelValues()); n != 2 {
		t.Errorf("%s = %v; want 2", CheckpointsTotal, n)
	}
}

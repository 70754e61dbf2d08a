package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/estimate"
	"refuel/pkg/marketmem"
	"refuel/pkg/policy"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

// fakeProvider sells offerings and, with scores, gives placement scores.
type fakeProvider struct {
	capacity.Provider // the rest panics: an estimate never acquires
	offerings         []capacity.Offering
	scores            map[string]int
	scoreErr          error
}

func (f *fakeProvider) Name() string { return "fake" }

func (f *fakeProvider) Offerings(_ context.Context, r spec.Resources) ([]capacity.Offering, error) {
	return capacity.Match(f.offerings, r), nil
}

func (f *fakeProvider) PlacementScores(context.Context, []capacity.Offering) (map[string]int, error) {
	return f.scores, f.scoreErr
}

func offering(zone string, m capacity.Market, price float64) capacity.Offering {
	return capacity.Offering{Provider: "fake", InstanceType: "p3.2xlarge", Zone: zone, Market: m, GPUs: 1, PricePerHour: price}
}

func deadlineJob(now time.Time, r spec.Resources) spec.JobSpec {
	d := now.Add(60 * time.Hour)
	return spec.JobSpec{ID: "j", Tier: spec.TierDeadline, Deadline: &d, Work: spec.Duration(48 * time.Hour), Resources: r, Policy: "refuel"}
}

func TestEstimateReadsWhatTheDeploymentKnows(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	prov := &fakeProvider{
		offerings: []capacity.Offering{
			offering("us-west-2a", capacity.Spot, 0.97), offering("us-west-2a", capacity.OnDemand, 3.06),
			offering("us-east-1a", capacity.Spot, 0.50), offering("us-east-1a", capacity.OnDemand, 5),
		},
		scores: map[string]int{"fake/p3.2xlarge/us-west-2a/spot": 8},
	}
	var watched policy.Availability
	for _, d := range []time.Duration{20 * time.Hour, 30 * time.Hour} {
		watched.Seen(true, d, true)
	}
	watched.Seen(false, time.Hour, true)
	mem := marketmem.View{Stock: map[string]marketmem.StockLog{
		"fake/p3.2xlarge/us-west-2a/spot": {Availability: watched, NoneSince: now.Add(-2 * time.Hour)},
	}}
	d := Deployment{Providers: []capacity.Provider{prov}, Memory: mem, Now: now}
	r, err := Estimate(context.Background(), deadlineJob(now, spec.Resources{MaxPricePerHour: 4}), d, EstimateOptions{Windows: 4})
	if err != nil {
		t.Fatal(err)
	}
	basis := r.Cases[0].Basis
	for _, want := range []string{
		"2.1 days of market memory for p3.2xlarge in us-west-2a",
		"built-in market aws-02-15-2023, no history for p3.2xlarge in us-east-1a",
		"placement scores us-west-2a 8",
	} {
		if !strings.Contains(basis, want) {
			t.Errorf("basis %q; want %q", basis, want)
		}
	}
	// us-east-1a's own on-demand is above max_price_per_hour: the run
	// takes us-west-2a's there.
	for _, u := range r.Cases[0].Offerings {
		if u.Offering == "fake/p3.2xlarge/us-east-1a/on-demand" {
			t.Errorf("offerings used %+v include an on-demand offering above the run's max price", r.Cases[0].Offerings)
		}
	}
	if got := r.Cases[0].OnDemandCostUSD; got != 147.49 {
		t.Errorf("on-demand's cost for the work $%v; want $147.49, 48h and a start at the cheapest allowed $3.06", got)
	}

	// A provider whose scores cannot be read leaves the pools to their
	// stock.
	prov.scores, prov.scoreErr = nil, errors.New("UnauthorizedOperation")
	r, err = Estimate(context.Background(), deadlineJob(now, spec.Resources{}), d, EstimateOptions{Windows: 4})
	if err != nil || strings.Contains(r.Cases[0].Basis, "placement scores") {
		t.Errorf("with scores unread: %v, basis %q; want an estimate without scores", err, r.Cases[0].Basis)
	}
}

// The pools file's offerings are what runs get where one is in force;
// resources nobody offers name what is offered and the fix.
func TestEstimateOfferingsOfThePoolsFile(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	pools := &pool.Config{Burst: []pool.BurstPool{{Name: "aws", Offerings: []capacity.Offering{
		offering("us-west-2b", capacity.Spot, 0.97), offering("us-west-2b", capacity.OnDemand, 3.06),
	}}}}
	d := Deployment{Pools: pools, PoolsFile: "pools.yaml", Providers: []capacity.Provider{&fakeProvider{offerings: []capacity.Offering{offering("us-west-2a", capacity.Spot, 0.97)}}}, Now: now}
	r, err := Estimate(context.Background(), deadlineJob(now, spec.Resources{}), d, EstimateOptions{Windows: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Cases[0].Basis; !strings.Contains(got, "p3.2xlarge in us-west-2b") || strings.Contains(got, "us-west-2a") {
		t.Errorf("basis %q; want the pools file's us-west-2b alone", got)
	}
	_, err = Estimate(context.Background(), deadlineJob(now, spec.Resources{InstanceTypes: []string{"p5.48xlarge"}}), d, EstimateOptions{Windows: 4})
	var ae *estimate.AskError
	if !errors.As(err, &ae) || ae.Field != "resources" || !strings.Contains(err.Error(), "instance_types p5.48xlarge match no offering of the pools file pools.yaml") ||
		!strings.Contains(err.Error(), "offers p3.2xlarge in us-west-2b") {
		t.Errorf("an instance type no pool has: %v; want an *AskError on resources naming what the pools file offers", err)
	}
}

// Submitted keeps the case as written with the time it was estimated.
func TestSubmittedIsTheSpecAsWritten(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r := estimate.Report{Cases: []estimate.Case{{Name: "as written"}, {Name: "tier critical"}}}
	if s := Submitted(r, at); s == nil || s.Name != "as written" || !s.EstimatedAt.Equal(at) {
		t.Errorf("Submitted: %+v; want the case as written, estimated at %s", s, at)
	}
	if s := Submitted(estimate.Report{}, at); s != nil {
		t.Errorf("Submitted of no case: %+v; want nil", s)
	}
}

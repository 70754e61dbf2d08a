package jobs

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	"refuel/workflows/workload"

	"refuel/activities"
	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
	"refuel/pkg/estimate"
	"refuel/pkg/marketmem"
	"refuel/pkg/policy"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
	"refuel/pkg/trace"
)

// Deployment is what a deployment knows that an estimate reads, as a
// client sees it: the pools file and the providers the worker runs with,
// and its market memory. Reading it starts, reserves and writes nothing.
type Deployment struct {
	// Pools is the pools file in force (the worker's --pools), nil for
	// none; PoolsFile names it in answers.
	Pools     *pool.Config
	PoolsFile string
	// Providers sell the offerings and give their prices where no pools
	// file is in force; a provider that is an activities.PlacementScorer
	// gives the placement scores of its spot pools too.
	Providers []capacity.Provider
	// Memory is the deployment's market memory (marketmem.Peek).
	Memory marketmem.View
	// SimMarket is the simulated cloud's market in force: its pools'
	// traces stand first for a pool the memory has watched too little;
	// SimMarketName names it. Without it, or where it has no trace of a
	// pool, the markets built into refuel stand in.
	SimMarket     *sim.Config
	SimMarketName string
	// RestartOverhead is what each start of an instance costs a run (the
	// worker's --changeover-overhead); 0 means the worker's default.
	RestartOverhead time.Duration
	// Now is the time the estimate is asked at; zero means time.Now.
	Now time.Time
}

// EstimateOptions say how much to estimate.
type EstimateOptions struct {
	// Alternatives adds the other tiers and deadlines to the spec as
	// written.
	Alternatives bool
	// Windows replayed per case; 0 means estimate.DefaultWindows.
	Windows int
	// Progress, when set, hears of each replay done.
	Progress func(done, total int)
}

// Estimate says what the run js asks for will cost and when it will
// finish on the deployment d, from what it knows: the offerings its
// resources match (the pools file's, else the providers'), at their
// prices, each pool's stock from the market memory or, where that is too
// short, from the built-in market. An ask nothing can run is a
// *estimate.AskError naming the field and the fix.
func Estimate(ctx context.Context, js spec.JobSpec, d Deployment, o EstimateOptions) (estimate.Report, error) {
	now := d.Now
	if now.IsZero() {
		now = time.Now()
	}
	offered, where, err := d.offerings(ctx)
	if err != nil {
		return estimate.Report{}, err
	}
	matched := capacity.Match(offered, js.Resources)
	if len(matched) == 0 {
		return estimate.Report{}, noOffering(js.Resources, offered, where)
	}
	pools, err := d.pools(ctx, matched, offered, now)
	if err != nil {
		return estimate.Report{}, err
	}
	ask := estimate.Ask{
		Tier: js.Tier, Policy: policy.Name(js.Policy), Work: js.Work.D(),
		Nodes: js.Resources.Nodes, MinNodes: js.Resources.MinNodes, RestartOverhead: d.RestartOverhead,
		BudgetUSD: js.BudgetUSD, Pools: pools, Alternatives: o.Alternatives, Windows: o.Windows,
		Seed: seedOf(js.ID), Progress: o.Progress,
	}
	if ask.RestartOverhead <= 0 {
		ask.RestartOverhead = workload.DefaultRunOptions().RestartOverhead
	}
	if js.Deadline != nil {
		ask.Deadline = js.Deadline.Sub(now)
	}
	return estimate.Estimate(ask)
}

// Submitted is the report's case of the spec as written, estimated at
// at: what Submit keeps with the run.
func Submitted(r estimate.Report, at time.Time) *estimate.Submitted {
	if len(r.Cases) == 0 {
		return nil
	}
	return &estimate.Submitted{EstimatedAt: at.UTC(), Case: r.Cases[0]}
}

// seedOf seeds the estimate's windows from the job's id, so one spec
// estimated twice reads the same.
func seedOf(id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return h.Sum64()
}

// offerings are what the deployment sells: the burst pools' offerings,
// or the providers'. where names their source in answers.
func (d Deployment) offerings(ctx context.Context) ([]capacity.Offering, string, error) {
	if d.Pools != nil {
		var out []capacity.Offering
		for _, b := range d.Pools.Burst {
			out = append(out, b.Offerings...)
		}
		return out, "the pools file " + d.PoolsFile, nil
	}
	var out []capacity.Offering
	var names []string
	for _, p := range d.Providers {
		os, err := p.Offerings(ctx, spec.Resources{})
		if err != nil {
			return nil, "", fmt.Errorf("offerings of provider %s: %w", p.Name(), err)
		}
		out = append(out, os...)
		names = append(names, p.Name())
	}
	return out, "provider " + strings.Join(names, ", "), nil
}

// noOffering says which resources match nothing, and what is offered.
func noOffering(r spec.Resources, offered []capacity.Offering, where string) error {
	var asked []string
	if len(r.InstanceTypes) > 0 {
		asked = append(asked, "instance_types "+strings.Join(r.InstanceTypes, ", "))
	}
	if len(r.Zones) > 0 {
		asked = append(asked, "zones "+strings.Join(r.Zones, ", "))
	}
	if len(r.Providers) > 0 {
		asked = append(asked, "providers "+strings.Join(r.Providers, ", "))
	}
	if r.GPUs > 1 {
		asked = append(asked, fmt.Sprintf("%d GPUs", r.GPUs))
	}
	if r.MaxPricePerHour > 0 {
		asked = append(asked, fmt.Sprintf("at most $%.2f/h", r.MaxPricePerHour))
	}
	byType := map[string][]string{}
	var types []string
	for _, o := range offered {
		if !slices.Contains(byType[o.InstanceType], o.Zone) {
			if byType[o.InstanceType] == nil {
				types = append(types, o.InstanceType)
			}
			byType[o.InstanceType] = append(byType[o.InstanceType], o.Zone)
		}
	}
	sort.Strings(types)
	var has []string
	for _, t := range types {
		has = append(has, t+" in "+strings.Join(byType[t], ", "))
	}
	fix := where + " offers nothing"
	if len(has) > 0 {
		fix = where + " offers " + strings.Join(has, "; ")
	}
	return &estimate.AskError{
		Field: "resources", Problem: strings.Join(asked, ", ") + " match no offering of " + where,
		Fix: fix + ": change resources, or add the offering to a burst pool",
	}
}

// pools pairs the matched offerings into pools (an instance type in a
// zone: its spot and its on-demand offering), each with what is known of
// its stock. A pool whose own on-demand offering the resources leave out
// (above max_price_per_hour, say) falls back to the cheapest on-demand
// they allow, as the run would; where they allow none, its own price
// stands for on-demand's, which the run would not pay.
func (d Deployment) pools(ctx context.Context, matched, offered []capacity.Offering, now time.Time) ([]estimate.Pool, error) {
	type key struct{ provider, instanceType, zone string }
	var order []key
	byKey := map[key]*estimate.Pool{}
	for _, o := range matched {
		if o.Market != capacity.Spot && o.Market != capacity.OnDemand {
			continue
		}
		k := key{o.Provider, o.InstanceType, o.Zone}
		p := byKey[k]
		if p == nil {
			p = &estimate.Pool{Provider: o.Provider, InstanceType: o.InstanceType, Zone: o.Zone}
			byKey[k] = p
			order = append(order, k)
		}
		if o.Market == capacity.Spot {
			p.Spot, p.SpotPrice = true, o.PricePerHour
		} else {
			p.OnDemandPrice = o.PricePerHour
		}
	}
	if len(order) == 0 {
		return nil, &estimate.AskError{Field: "resources", Problem: "match only base machines", Fix: "an estimate prices burst capacity: allow a spot or on-demand offering"}
	}
	out := make([]estimate.Pool, 0, len(order))
	for _, k := range order {
		p := *byKey[k]
		if p.OnDemandPrice == 0 {
			od, ok := cheapestOnDemand(matched, "")
			if !ok {
				od, ok = cheapestOnDemand(offered, p.InstanceType)
			}
			if !ok {
				return nil, &estimate.AskError{Field: "resources", Problem: fmt.Sprintf("match no on-demand offering, and %s is sold on no on-demand market", p.InstanceType),
					Fix: "an estimate compares with on-demand: allow an on-demand offering"}
			}
			p.OnDemandPrice, p.OnDemandOffering = od.PricePerHour, od.Key()
		}
		if p.Spot {
			d.stockOf(&p, now)
		}
		out = append(out, p)
	}
	d.score(ctx, out)
	return out, nil
}

// cheapestOnDemand is the cheapest on-demand offering among offerings,
// of instanceType only when it is not empty.
func cheapestOnDemand(offerings []capacity.Offering, instanceType string) (capacity.Offering, bool) {
	var best capacity.Offering
	ok := false
	for _, o := range offerings {
		if o.Market == capacity.OnDemand && (instanceType == "" || o.InstanceType == instanceType) && (!ok || o.PricePerHour < best.PricePerHour) {
			best, ok = o, true
		}
	}
	return best, ok
}

// stockOf gives p what is known of its spot stock: the memory's log and
// the outage it knows open, and the trace that stands in for it where the
// memory is short.
func (d Deployment) stockOf(p *estimate.Pool, now time.Time) {
	if l, ok := d.Memory.Stock[p.Key()]; ok {
		a := l.Availability
		p.Memory = &a
		if !l.NoneSince.IsZero() {
			p.Current = &estimate.Stretch{For: max(0, now.Sub(l.NoneSince))}
		}
	}
	p.Builtin, p.BuiltinMarket, p.StandIn = d.traceOf(p.InstanceType, p.Zone)
}

// traceOf is the trace of an instance type in a zone: the simulated
// cloud's market in force first, then the markets built into refuel;
// where none has that pool, the first pool of the same instance type
// stands in (standIn names it), or else the default market's first pool.
func (d Deployment) traceOf(instanceType, zone string) (t *trace.Trace, market, standIn string) {
	type named struct {
		name string
		cfg  sim.Config
	}
	var markets []named
	if d.SimMarket != nil {
		markets = append(markets, named{d.SimMarketName, *d.SimMarket})
	}
	for _, name := range sim.BuiltInMarkets {
		if cfg, _, err := sim.MarketAt(sim.BuiltIn+name, nil); err == nil {
			markets = append(markets, named{name, cfg})
		}
	}
	for _, m := range markets {
		for _, pc := range m.cfg.Pools {
			if pc.Spot != nil && pc.InstanceType == instanceType && pc.Zone == zone {
				return pc.Spot, m.name, ""
			}
		}
	}
	for _, m := range markets {
		for _, pc := range m.cfg.Pools {
			if pc.Spot != nil && pc.InstanceType == instanceType {
				return pc.Spot, m.name, pc.InstanceType + " in " + pc.Zone
			}
		}
	}
	for _, m := range markets {
		for _, pc := range m.cfg.Pools {
			if pc.Spot != nil {
				return pc.Spot, m.name, pc.InstanceType + " in " + pc.Zone
			}
		}
	}
	return nil, "", ""
}

// score sets the placement score of each spot pool whose provider gives
// one. A provider that cannot be asked leaves the pools to their stock.
func (d Deployment) score(ctx context.Context, pools []estimate.Pool) {
	var offerings []capacity.Offering
	for _, p := range pools {
		if p.Spot {
			offerings = append(offerings, capacity.Offering{Provider: p.Provider, InstanceType: p.InstanceType, Zone: p.Zone, Market: capacity.Spot})
		}
	}
	for _, prov := range d.Providers {
		scorer, ok := prov.(activities.PlacementScorer)
		if !ok {
			continue
		}
		scores, err := scorer.PlacementScores(ctx, offerings)
		if err != nil {
			continue
		}
		for i := range pools {
			if s, ok := scores[pools[i].Key()]; ok {
				pools[i].PlacementScore = s
			}
		}
	}
}

package ec2api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/google/uuid"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
)

type templateXML struct {
	ID      string `xml:"launchTemplateId,omitempty"`
	Name    string `xml:"launchTemplateName,omitempty"`
	Version string `xml:"version,omitempty"`
}

// readTemplate reads a launch template specification. The sim's
// templates hold nothing (an override names the instance type): any name
// is accepted unless SetLaunchTemplates says which exist.
func (h *Handler) readTemplate(p *params, key string) (templateXML, error) {
	t := templateXML{ID: p.str(key + ".LaunchTemplateId"), Name: p.str(key + ".LaunchTemplateName"), Version: p.str(key + ".Version")}
	if t.ID != "" && t.Name != "" {
		return t, errorf(codeInvalidCombination, "Specify either %s.LaunchTemplateId or %s.LaunchTemplateName, not both.", key, key)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.templates == nil || t == (templateXML{}):
	case t.Name != "" && !h.templates[t.Name]:
		return t, errorf("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", t.Name)
	case t.ID != "" && !h.templateIDLocked(t.ID):
		return t, errorf("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", t.ID)
	}
	return t, nil
}

func (h *Handler) templateIDLocked(id string) bool {
	for name := range h.templates {
		if LaunchTemplateID(name) == id {
			return true
		}
	}
	return false
}

// SetLaunchTemplates says which launch templates exist, by name; a
// launch naming another (by name, or by an ID not LaunchTemplateID of
// one of them) fails as on EC2, with InvalidLaunchTemplateName.
// NotFoundException or InvalidLaunchTemplateId.NotFound. Until it is
// called every template exists.
func (h *Handler) SetLaunchTemplates(names ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.templates = map[string]bool{}
	for _, n := range names {
		h.templates[n] = true
	}
}

// LaunchTemplateID is the ID of the sim's launch template of that name.
func LaunchTemplateID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "lt-" + hex.EncodeToString(sum[:])[:17]
}

type overridesXML struct {
	InstanceType     string   `xml:"instanceType"`
	AvailabilityZone string   `xml:"availabilityZone,omitempty"`
	MaxPrice         string   `xml:"maxPrice,omitempty"`
	Priority         *float64 `xml:"priority,omitempty"`
}

type templateAndOverridesXML struct {
	Template  templateXML  `xml:"launchTemplateSpecification"`
	Overrides overridesXML `xml:"overrides"`
}

type fleetErrorXML struct {
	TemplateAndOverrides templateAndOverridesXML `xml:"launchTemplateAndOverrides"`
	Lifecycle            string                  `xml:"lifecycle"`
	ErrorCode            string                  `xml:"errorCode"`
	ErrorMessage         string                  `xml:"errorMessage"`
}

type fleetInstancesXML struct {
	TemplateAndOverrides templateAndOverridesXML `xml:"launchTemplateAndOverrides"`
	Lifecycle            string                  `xml:"lifecycle"`
	InstanceIDs          []string                `xml:"instanceIds>item"`
	InstanceType         string                  `xml:"instanceType"`
}

type createFleetResponse struct {
	XMLName xml.Name `xml:"CreateFleetResponse"`
	meta
	FleetID   string              `xml:"fleetId"`
	Errors    []fleetErrorXML     `xml:"errorSet>item"`
	Instances []fleetInstancesXML `xml:"fleetInstanceSet>item"`
}

// override is one launch template override: a pool and, for spot, the
// most it pays and its priority.
type override struct {
	echo     templateAndOverridesXML
	pool     sim.Pool
	maxPrice float64
	priority float64 // lower first; +Inf when not given
}

// fleetRequest is a CreateFleet request, read and checked.
type fleetRequest struct {
	token            string
	dryRun           bool
	spot, onDemand   int // instances wanted on each market
	spotStrategy     string
	onDemandStrategy string
	overrides        []override
	instanceTags     map[string]string
}

// createFleet serves instant fleets: it launches the target capacity
// across the overrides in the order of the allocation strategy and
// reports, as EC2 does for instant fleets, each override that could not
// be filled in the Errors list of a successful response rather than
// failing the call.
func (h *Handler) createFleet(ctx context.Context, p *params) (response, error) {
	in, err := h.readFleet(p)
	if err != nil {
		return nil, err
	}
	if err := checkRequest(p, in.dryRun); err != nil {
		return nil, err
	}
	settle, err := h.useToken("CreateFleet", in.token, p)
	if err != nil {
		return nil, err
	}
	resp := &createFleetResponse{FleetID: "fleet-" + uuid.NewString()}
	if in.token != "" {
		resp.FleetID = "fleet-" + uuid.NewSHA1(uuid.NameSpaceURL, []byte("CreateFleet/"+in.token)).String()
	}
	type group struct {
		override  int
		lifecycle string
	}
	type reason struct {
		group
		code string
	}
	reported := map[reason]bool{} // one error per override, market and code
	groups := map[group]int{}     // → index in resp.Instances
	slot := 0
	for _, m := range []struct {
		market   capacity.Market
		n        int
		strategy string
	}{{capacity.Spot, in.spot, in.spotStrategy}, {capacity.OnDemand, in.onDemand, in.onDemandStrategy}} {
		lifecycle := string(m.market)
		for range m.n {
			st, failures, err := h.launchSlot(ctx, in, m.market, m.strategy, slot)
			slot++
			if err != nil {
				settle(len(resp.Instances) > 0)
				return nil, err
			}
			for _, f := range failures {
				key := reason{group{f.override, lifecycle}, f.code}
				if !reported[key] {
					reported[key] = true
					resp.Errors = append(resp.Errors, fleetErrorXML{TemplateAndOverrides: in.overrides[f.override].echo, Lifecycle: lifecycle, ErrorCode: f.code, ErrorMessage: f.message})
				}
			}
			if st == nil {
				break // every override failed: so would the next instance
			}
			h.recordLaunch(st.ID, launch{reservation: "r-" + st.ID[len("i-"):], clientToken: in.token})
			oi := slices.IndexFunc(in.overrides, func(o override) bool {
				return o.pool == sim.Pool{Zone: st.Offering.Zone, InstanceType: st.Offering.InstanceType}
			})
			key := group{oi, lifecycle}
			g, ok := groups[key]
			if !ok {
				g = len(resp.Instances)
				groups[key] = g
				resp.Instances = append(resp.Instances, fleetInstancesXML{TemplateAndOverrides: in.overrides[oi].echo, Lifecycle: lifecycle, InstanceType: st.Offering.InstanceType})
			}
			resp.Instances[g].InstanceIDs = append(resp.Instances[g].InstanceIDs, st.ID)
		}
	}
	settle(len(resp.Instances) > 0)
	return resp, nil
}

func (h *Handler) readFleet(p *params) (fleetRequest, error) {
	var in fleetRequest
	typ, err := p.oneOf("Type", "maintain", "instant", "request", "maintain")
	if err != nil {
		return in, err
	}
	if typ != "instant" {
		return in, errorf("UnsupportedOperation", "The simulated EC2 serves fleets of Type instant only, not %s (the default when Type is not given is maintain).", typ)
	}
	const tcs = "TargetCapacitySpecification"
	total, set, err := p.integer(tcs + ".TotalTargetCapacity")
	switch {
	case err != nil:
		return in, err
	case !set:
		return in, missing(tcs + ".TotalTargetCapacity")
	case total < 1:
		return in, errorf(codeInvalidValue, "Value (%d) for parameter %s.TotalTargetCapacity is invalid. It must be at least 1 for an instant fleet.", total, tcs)
	case total > maxLaunch:
		return in, errorf(codeInvalidValue, "Value (%d) for parameter %s.TotalTargetCapacity is invalid. The simulated EC2 launches at most %d instances per request.", total, tcs, maxLaunch)
	}
	def, err := p.oneOf(tcs+".DefaultTargetCapacityType", "", "spot", "on-demand")
	if err != nil {
		return in, err
	}
	if def == "" {
		return in, missing(tcs + ".DefaultTargetCapacityType")
	}
	spot, _, err := p.integer(tcs + ".SpotTargetCapacity")
	if err != nil {
		return in, err
	}
	onDemand, _, err := p.integer(tcs + ".OnDemandTargetCapacity")
	if err != nil {
		return in, err
	}
	// The default type takes what the other type's target leaves.
	if def == "spot" {
		in.onDemand, in.spot = onDemand, total-onDemand
	} else {
		in.spot, in.onDemand = spot, total-spot
	}
	if spot < 0 || onDemand < 0 || in.spot < 0 || in.onDemand < 0 || spot+onDemand > total {
		return in, errorf(codeInvalidCombination, "%s: SpotTargetCapacity (%d) and OnDemandTargetCapacity (%d) must add up to at most TotalTargetCapacity (%d).", tcs, spot, onDemand, total)
	}
	if _, err := p.oneOf(tcs+".TargetCapacityUnitType", "units", "units"); err != nil {
		return in, err
	}
	if in.spotStrategy, err = p.oneOf("SpotOptions.AllocationStrategy", "lowest-price",
		"lowest-price", "price-capacity-optimized", "capacity-optimized", "capacity-optimized-prioritized"); err != nil {
		return in, err
	}
	if _, err := p.oneOf("SpotOptions.InstanceInterruptionBehavior", "terminate", "terminate"); err != nil {
		return in, err
	}
	if in.onDemandStrategy, err = p.oneOf("OnDemandOptions.AllocationStrategy", "lowest-price", "lowest-price", "prioritized"); err != nil {
		return in, err
	}
	configs := p.indexes("LaunchTemplateConfigs")
	if len(configs) == 0 {
		return in, missing("LaunchTemplateConfigs")
	}
	for _, i := range configs {
		overrides, err := h.readOverrides(p, fmt.Sprintf("LaunchTemplateConfigs.%d", i))
		if err != nil {
			return in, err
		}
		in.overrides = append(in.overrides, overrides...)
	}
	in.token = p.str("ClientToken")
	if in.dryRun, err = p.boolean("DryRun"); err != nil {
		return in, err
	}
	in.instanceTags, err = p.instanceTags("fleet")
	return in, err
}

// readOverrides reads one launch template config. Without launch
// templates the sim needs each override to name its instance type; one
// without a zone stands for every zone that sells the type.
func (h *Handler) readOverrides(p *params, key string) ([]override, error) {
	tmpl, err := h.readTemplate(p, key+".LaunchTemplateSpecification")
	if err != nil {
		return nil, err
	}
	if tmpl.ID == "" && tmpl.Name == "" {
		return nil, missing(key + ".LaunchTemplateSpecification.LaunchTemplateId")
	}
	indexes := p.indexes(key + ".Overrides")
	if len(indexes) == 0 {
		return nil, errorf("MissingParameter", "The request must contain the parameter %s.Overrides: the simulated EC2 has no launch templates to take instance types from", key)
	}
	var out []override
	for _, j := range indexes {
		okey := fmt.Sprintf("%s.Overrides.%d", key, j)
		instanceType := p.str(okey + ".InstanceType")
		if instanceType == "" {
			return nil, missing(okey + ".InstanceType")
		}
		var zones []string
		if z := p.str(okey + ".AvailabilityZone"); z != "" {
			zones = []string{z}
		}
		if err := subnetBesideZone(p, okey+".SubnetId", len(zones) > 0); err != nil {
			return nil, err
		}
		maxPrice, _, err := p.number(okey + ".MaxPrice")
		if err != nil {
			return nil, err
		}
		priority, hasPriority, err := p.number(okey + ".Priority")
		if err != nil {
			return nil, err
		}
		offers, err := h.offers(instanceType, zones, capacity.Spot, maxPrice)
		if err != nil {
			return nil, err
		}
		for _, o := range offers {
			ov := override{pool: o.Pool, maxPrice: maxPrice, priority: math.Inf(1)}
			ov.echo = templateAndOverridesXML{Template: tmpl, Overrides: overridesXML{InstanceType: instanceType, AvailabilityZone: o.Zone, MaxPrice: p.form.Get(okey + ".MaxPrice")}}
			if hasPriority {
				ov.priority = priority
				ov.echo.Overrides.Priority = &priority
			}
			out = append(out, ov)
		}
	}
	return out, nil
}

// allocate orders the overrides for the next instance of a market, by
// the fleet's allocation strategy over the market as it is now:
//
//   - lowest-price: cheapest first;
//   - capacity-optimized: most spare spot stock first;
//   - price-capacity-optimized: pools with spare stock before those
//     without, cheapest first within each, then most spare;
//   - capacity-optimized-prioritized, prioritized: by Priority (lowest
//     first, unset last), then (spot) most spare.
//
// Ties keep the request's order.
func (h *Handler) allocate(overrides []override, market capacity.Market, strategy string) []int {
	pools := map[sim.Pool]sim.PoolState{}
	for _, ps := range h.cloud.Market().Pools {
		pools[ps.Pool] = ps
	}
	price := func(oi int) float64 {
		ps, ok := pools[overrides[oi].pool]
		switch {
		case !ok:
			return math.Inf(1)
		case market == capacity.Spot:
			return ps.SpotPrice
		}
		return ps.OnDemandPrice
	}
	spare := func(oi int) int {
		return pools[overrides[oi].pool].SpotSpare()
	}
	order := make([]int, len(overrides))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		switch strategy {
		case "capacity-optimized":
			return spare(a) > spare(b)
		case "price-capacity-optimized":
			if (spare(a) > 0) != (spare(b) > 0) {
				return spare(a) > 0
			}
			if price(a) != price(b) {
				return price(a) < price(b)
			}
			return spare(a) > spare(b)
		case "capacity-optimized-prioritized", "prioritized":
			if overrides[a].priority != overrides[b].priority {
				return overrides[a].priority < overrides[b].priority
			}
			return market == capacity.Spot && spare(a) > spare(b)
		}
		return price(a) < price(b)
	})
	return order
}

// overrideFailure is one override's refusal to launch an instance.
type overrideFailure struct {
	override      int
	code, message string
}

// launchSlot launches the slot-th instance of a fleet on a market: it
// tries the overrides one by one in allocation order, so that every
// override passed over is reported, and returns nil when none could be
// filled. Each try carries the slot's token: a retried request finds the
// instance its first try launched, whichever override that was.
func (h *Handler) launchSlot(ctx context.Context, in fleetRequest, market capacity.Market, strategy string, slot int) (*sim.Status, []overrideFailure, error) {
	var failures []overrideFailure
	for _, oi := range h.allocate(in.overrides, market, strategy) {
		offer := sim.Offer{Pool: in.overrides[oi].pool, Market: market}
		if market == capacity.Spot {
			offer.MaxPrice = in.overrides[oi].maxPrice
		}
		st, err := h.cloud.Launch(ctx, sim.LaunchRequest{Token: slotToken("CreateFleet", in.token, slot), Offers: []sim.Offer{offer}, Tags: in.instanceTags})
		if err == nil {
			return &st, failures, nil
		}
		fs := capacity.Failures(err)
		if len(fs) == 0 {
			return nil, nil, fromSim(err) // not the offer's fault: the sim is closing or ctx ended
		}
		for _, f := range fs {
			code := f.Code
			if code == "" {
				code = "InternalError"
			}
			failures = append(failures, overrideFailure{override: oi, code: code, message: f.Message})
		}
	}
	return nil, failures, nil
}

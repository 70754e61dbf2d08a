package ec2api

import (
	"context"
	"encoding/xml"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/sim"
)

// instanceXML is EC2's Instance, the fields the sim knows.
type instanceXML struct {
	InstanceID         string          `xml:"instanceId"`
	ImageID            string          `xml:"imageId,omitempty"`
	State              stateXML        `xml:"instanceState"`
	InstanceType       string          `xml:"instanceType"`
	LaunchTime         string          `xml:"launchTime"`
	Placement          placementXML    `xml:"placement"`
	PrivateIPAddress   string          `xml:"privateIpAddress,omitempty"`
	Lifecycle          string          `xml:"instanceLifecycle,omitempty"`
	SpotRequestID      string          `xml:"spotInstanceRequestId,omitempty"`
	ClientToken        string          `xml:"clientToken,omitempty"`
	StateReason        *stateReasonXML `xml:"stateReason"`
	Architecture       string          `xml:"architecture"`
	RootDeviceType     string          `xml:"rootDeviceType"`
	VirtualizationType string          `xml:"virtualizationType"`
	Tags               []tagXML        `xml:"tagSet>item"`
}

type stateXML struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type placementXML struct {
	AvailabilityZone string `xml:"availabilityZone"`
	Tenancy          string `xml:"tenancy"`
}

type stateReasonXML struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type tagXML struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type reservationXML struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []instanceXML `xml:"instancesSet>item"`
}

// ec2State is EC2's view of a sim state: an instance serving its notice
// still runs until it is taken.
func ec2State(s capacity.State) stateXML {
	switch s {
	case capacity.StatePending:
		return stateXML{0, "pending"}
	case capacity.StateTerminated:
		return stateXML{48, "terminated"}
	case capacity.StateStopped:
		return stateXML{80, "stopped"}
	}
	return stateXML{16, "running"}
}

var shuttingDown = stateXML{32, "shutting-down"}

// ec2Time is EC2's timestamp format.
func ec2Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func (h *Handler) instanceXML(st sim.Status) instanceXML {
	l := h.launchOf(st.ID)
	x := instanceXML{
		InstanceID: st.ID, ImageID: l.imageID, State: ec2State(st.State), InstanceType: st.Offering.InstanceType,
		LaunchTime: ec2Time(st.LaunchedAt), Placement: placementXML{AvailabilityZone: st.Offering.Zone, Tenancy: "default"},
		ClientToken: l.clientToken, Architecture: "x86_64", RootDeviceType: "ebs", VirtualizationType: "hvm",
	}
	if st.Offering.Market == capacity.Spot {
		x.Lifecycle = "spot"
		x.SpotRequestID = "sir-" + st.ID[len("i-"):]
	}
	if st.State == capacity.StateTerminated {
		x.StateReason = &stateReasonXML{Code: st.Reason.Code, Message: st.Reason.Message}
	} else {
		// As on EC2, an instance has its private address from its launch
		// until it is terminated: where its peers reach it.
		x.PrivateIPAddress = st.Address
	}
	for _, k := range slices.Sorted(maps.Keys(st.Tags)) {
		x.Tags = append(x.Tags, tagXML{Key: k, Value: st.Tags[k]})
	}
	return x
}

var instanceIDPattern = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)

// findInstances looks ids up, refusing malformed and unknown ones as EC2
// does: all of a request's instances exist or nothing is done.
func (h *Handler) findInstances(ids []string) ([]sim.Status, error) {
	var out []sim.Status
	var unknown []string
	for _, id := range ids {
		if !instanceIDPattern.MatchString(id) {
			return nil, errorf("InvalidInstanceID.Malformed", "Invalid id: %q", id)
		}
		st, err := h.cloud.Status(id)
		if err != nil {
			unknown = append(unknown, id)
			continue
		}
		out = append(out, st)
	}
	switch len(unknown) {
	case 0:
		return out, nil
	case 1:
		return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", unknown[0])
	}
	return nil, errorf("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(unknown, ", "))
}

type runInstancesResponse struct {
	XMLName xml.Name `xml:"RunInstancesResponse"`
	meta
	reservationXML
}

// runInstances launches MinCount..MaxCount instances of one type in the
// zone given, or in the first zone that has it; fewer than MinCount is
// the failure of the last launch, and nothing stays launched.
func (h *Handler) runInstances(ctx context.Context, p *params) (response, error) {
	minCount, minSet, err := p.integer("MinCount")
	if err != nil {
		return nil, err
	}
	maxCount, maxSet, err := p.integer("MaxCount")
	switch {
	case err != nil:
		return nil, err
	case !minSet:
		return nil, missing("MinCount")
	case !maxSet:
		return nil, missing("MaxCount")
	case minCount < 1:
		return nil, errorf(codeInvalidValue, "Value (%d) for parameter minCount is invalid. Expected a positive integer.", minCount)
	case maxCount < minCount:
		return nil, errorf(codeInvalidValue, "Value (%d) for parameter maxCount is invalid. Expected a value of at least minCount (%d).", maxCount, minCount)
	case maxCount > maxLaunch:
		return nil, errorf(codeInvalidValue, "Value (%d) for parameter maxCount is invalid. The simulated EC2 launches at most %d instances per request.", maxCount, maxLaunch)
	}
	imageID := p.str("ImageId")
	template, err := h.readTemplate(p, "LaunchTemplate")
	if err != nil {
		return nil, err
	}
	if imageID == "" && template == (templateXML{}) {
		return nil, missing("ImageId")
	}
	instanceType := p.str("InstanceType")
	if instanceType == "" {
		return nil, errorf("MissingParameter", "The request must contain the parameter InstanceType (the simulated EC2 has no launch templates to take it from)")
	}
	zone := p.str("Placement.AvailabilityZone")
	if err := subnetBesideZone(p, "SubnetId", zone != ""); err != nil {
		return nil, err
	}
	if _, err := p.oneOf("Placement.Tenancy", "default", "default"); err != nil {
		return nil, err
	}
	market, maxPrice, err := readMarketOptions(p)
	if err != nil {
		return nil, err
	}
	token := p.str("ClientToken")
	dryRun, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	tags, err := p.instanceTags("volume", "network-interface", "spot-instances-request")
	if err != nil {
		return nil, err
	}
	p.accept("KeyName", "UserData", "SecurityGroupId", "SecurityGroup", "IamInstanceProfile", "MetadataOptions", "Monitoring", "EbsOptimized")
	var zones []string
	if zone != "" {
		zones = []string{zone}
	}
	offers, err := h.offers(instanceType, zones, market, maxPrice)
	if err != nil {
		return nil, err
	}
	if err := checkRequest(p, dryRun); err != nil {
		return nil, err
	}
	settle, err := h.useToken("RunInstances", token, p)
	if err != nil {
		return nil, err
	}
	var launched []sim.Status
	var failure error
	for i := range maxCount {
		st, err := h.cloud.Launch(ctx, sim.LaunchRequest{Token: slotToken("RunInstances", token, i), Offers: offers, Tags: tags})
		if err != nil {
			failure = err
			break
		}
		launched = append(launched, st)
	}
	if len(launched) < minCount {
		for _, st := range launched {
			_, _ = h.cloud.Terminate(st.ID)
		}
		settle(false)
		return nil, fromSim(failure)
	}
	settle(true)
	resp := &runInstancesResponse{reservationXML: reservationXML{ReservationID: "r-" + launched[0].ID[len("i-"):], OwnerID: OwnerID}}
	for _, st := range launched {
		h.recordLaunch(st.ID, launch{reservation: resp.ReservationID, clientToken: token, imageID: imageID})
		resp.Instances = append(resp.Instances, h.instanceXML(st))
	}
	return resp, nil
}

// subnetBesideZone accepts a subnet given with its zone: the sim has no
// subnets, so the zone places the instance.
func subnetBesideZone(p *params, key string, hasZone bool) error {
	if p.str(key) != "" && !hasZone {
		return errorf("UnsupportedOperation", "The simulated EC2 has no subnets to place an instance by %s: give its availability zone too.", key)
	}
	return nil
}

// readMarketOptions reads InstanceMarketOptions: spot, one-time and
// terminated on interruption, is the one kind of spot instance the sim has.
func readMarketOptions(p *params) (capacity.Market, float64, error) {
	market, err := p.oneOf("InstanceMarketOptions.MarketType", "", "spot")
	if err != nil {
		return "", 0, err
	}
	maxPrice, priceSet, err := p.number("InstanceMarketOptions.SpotOptions.MaxPrice")
	if err != nil {
		return "", 0, err
	}
	kind, err := p.oneOf("InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time", "one-time", "persistent")
	if err != nil {
		return "", 0, err
	}
	behaviour, err := p.oneOf("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate", "terminate", "stop", "hibernate")
	if err != nil {
		return "", 0, err
	}
	spotOptions := priceSet || p.form.Has("InstanceMarketOptions.SpotOptions.SpotInstanceType") || p.form.Has("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior")
	switch {
	case market == "" && spotOptions:
		return "", 0, errorf(codeInvalidCombination, "InstanceMarketOptions.SpotOptions requires InstanceMarketOptions.MarketType spot")
	case kind == "persistent" && behaviour == "terminate":
		return "", 0, errorf(codeInvalidCombination, "A persistent Spot Instance request requires the interruption behavior stop or hibernate")
	case kind == "one-time" && behaviour != "terminate":
		return "", 0, errorf(codeInvalidCombination, "A one-time Spot Instance request requires the interruption behavior terminate")
	case kind == "persistent":
		return "", 0, errorf("UnsupportedOperation", "The simulated EC2 runs one-time Spot Instances only: they terminate when interrupted")
	case market == "spot":
		return capacity.Spot, maxPrice, nil
	}
	return capacity.OnDemand, 0, nil
}

// offers lists where an instance type may be launched on a market: in
// the zones given, or every zone that sells it. A type the sim sells
// nowhere and a zone it does not have are refused outright, as EC2
// refuses names that do not exist; a type not sold in a zone is the
// launch's own Unsupported failure.
func (h *Handler) offers(instanceType string, zones []string, market capacity.Market, maxPrice float64) ([]sim.Offer, error) {
	m := h.cloud.Market()
	known := map[string]bool{}
	var sells []string
	for _, ps := range m.Pools {
		known[ps.Zone] = true
		if ps.InstanceType == instanceType {
			sells = append(sells, ps.Zone)
		}
	}
	if len(sells) == 0 {
		var names []string
		for _, t := range h.cloud.Catalogue() {
			names = append(names, t.Name)
		}
		return nil, errorf(codeInvalidValue, "Invalid value '%s' for InstanceType. The simulated EC2 sells %s.", instanceType, strings.Join(names, ", "))
	}
	if len(zones) == 0 {
		zones = sells
	}
	var out []sim.Offer
	for _, z := range zones {
		if !known[z] {
			return nil, errorf(codeInvalidValue, "Invalid availability zone: [%s]", z)
		}
		out = append(out, sim.Offer{Pool: sim.Pool{Zone: z, InstanceType: instanceType}, Market: market, MaxPrice: maxPrice})
	}
	return out, nil
}

// slotToken is the sim's token for the i-th instance of a request with a
// client token; none without one.
func slotToken(action, clientToken string, i int) string {
	if clientToken == "" {
		return ""
	}
	return action + "/" + clientToken + "/" + strconv.Itoa(i)
}

type describeInstancesResponse struct {
	XMLName xml.Name `xml:"DescribeInstancesResponse"`
	meta
	Reservations []reservationXML `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

// instanceFilters are the DescribeInstances filters the sim knows, with
// tag:KEY besides.
var instanceFilters = []string{
	"instance-id", "instance-state-name", "instance-state-code", "instance-type", "availability-zone",
	"instance-lifecycle", "client-token", "reservation-id", "tag-key", "tag-value",
}

func knownInstanceFilter(name string) bool {
	return slices.Contains(instanceFilters, name) || strings.HasPrefix(name, "tag:")
}

// instanceFields gives an instance's values for a DescribeInstances
// filter name; nil when it has none.
func (h *Handler) instanceFields(st sim.Status, name string) []string {
	x := ec2State(st.State)
	switch name {
	case "instance-id":
		return []string{st.ID}
	case "instance-state-name":
		return []string{x.Name}
	case "instance-state-code":
		return []string{strconv.Itoa(x.Code)}
	case "instance-type":
		return []string{st.Offering.InstanceType}
	case "availability-zone":
		return []string{st.Offering.Zone}
	case "instance-lifecycle":
		if st.Offering.Market == capacity.Spot {
			return []string{"spot"}
		}
		return nil
	case "client-token":
		return []string{h.launchOf(st.ID).clientToken}
	case "reservation-id":
		return []string{h.launchOf(st.ID).reservation}
	case "tag-key":
		return slices.Collect(maps.Keys(st.Tags))
	case "tag-value":
		return slices.Collect(maps.Values(st.Tags))
	}
	if v, ok := st.Tags[strings.TrimPrefix(name, "tag:")]; ok && strings.HasPrefix(name, "tag:") {
		return []string{v}
	}
	return nil
}

func (h *Handler) describeInstances(_ context.Context, p *params) (response, error) {
	ids := p.list("InstanceId")
	filters, err := p.filters()
	if err != nil {
		return nil, err
	}
	if err := checkFilters(filters, knownInstanceFilter); err != nil {
		return nil, err
	}
	if len(ids) > 0 && p.form.Has("MaxResults") {
		return nil, errorf(codeInvalidCombination, "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	dryRun, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	// Compute Engine's instances share the market, not this API: their
	// names are no EC2 instance IDs, and EC2 does not list them.
	gce := map[string]bool{}
	for _, t := range h.cloud.Catalogue() {
		gce[t.Name] = t.Cloud == sim.CloudGCE
	}
	all := slices.DeleteFunc(h.cloud.Instances(), func(st sim.Status) bool { return gce[st.Offering.InstanceType] })
	if len(ids) > 0 {
		if all, err = h.findInstances(ids); err != nil {
			return nil, err
		}
	}
	var matched []sim.Status
	for _, st := range all {
		if matchesAll(filters, func(name string) []string { return h.instanceFields(st, name) }) {
			matched = append(matched, st)
		}
	}
	from, to, next, err := p.page(len(matched), 5)
	if err != nil {
		return nil, err
	}
	if err := checkRequest(p, dryRun); err != nil {
		return nil, err
	}
	resp := &describeInstancesResponse{NextToken: next}
	index := map[string]int{}
	for _, st := range matched[from:to] {
		res := h.launchOf(st.ID).reservation
		i, ok := index[res]
		if !ok {
			i = len(resp.Reservations)
			index[res] = i
			resp.Reservations = append(resp.Reservations, reservationXML{ReservationID: res, OwnerID: OwnerID})
		}
		resp.Reservations[i].Instances = append(resp.Reservations[i].Instances, h.instanceXML(st))
	}
	return resp, nil
}

package aws

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeEC2 speaks EC2's Query API for the five actions the provider calls,
// with just enough state to answer them: instances, fleets by client
// token, offerings and spot prices. Its exported-looking fields are the
// test's knobs; set them before the first call.
type fakeEC2 struct {
	// Offered is where each instance type is sold: type → zones.
	Offered map[string][]string
	// SpotPrices are the DescribeSpotPriceHistory records.
	SpotPrices []fakeSpotPrice
	// LaunchErrors makes a fleet report a launch error for an override,
	// keyed "type/zone/market", instead of launching it.
	LaunchErrors map[string]string
	// CallErrors fails the next calls of an action with these codes, one
	// per call, before the action works again.
	CallErrors map[string][]string
	// PendingFor is how many DescribeInstances a new instance stays
	// pending for before it runs.
	PendingFor int
	// EndReason, when set, is the state reason of new instances that end
	// at launch instead of running.
	EndReason string
	// PageSize pages every Describe* answer; 0 answers in one page.
	PageSize int

	mu        sync.Mutex
	calls     []url.Values
	instances []*fakeInstance
	fleets    map[string]fakeFleet
}

type fakeSpotPrice struct {
	InstanceType, Zone, Product, Price string
	At                                 time.Time
}

type fakeInstance struct {
	id, instanceType, zone, lifecycle, state, reason string
	privateIP                                        string
	tags                                             map[string]string
	pendingFor                                       int
}

type fakeFleet struct{ params, body string }

// fakeLaunchTime is when every fake instance launched.
var fakeLaunchTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fakeError struct {
	status        int
	code, message string
}

func (f *fakeEC2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	v, err := url.ParseQuery(string(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	action := v.Get("Action")
	f.mu.Lock()
	f.calls = append(f.calls, v)
	out, ferr := f.answer(action, v)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	if ferr != nil {
		w.WriteHeader(ferr.status)
		fmt.Fprintf(w, "<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>req-1</RequestID></Response>",
			esc(ferr.code), esc(ferr.message))
		return
	}
	fmt.Fprintf(w, `<%sResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>req-1</requestId>%s</%sResponse>`, action, out, action)
}

func (f *fakeEC2) answer(action string, v url.Values) (string, *fakeError) {
	if queue := f.CallErrors[action]; len(queue) > 0 {
		f.CallErrors[action] = queue[1:]
		status := http.StatusBadRequest
		switch queue[0] {
		case "RequestLimitExceeded":
			status = http.StatusServiceUnavailable
		case "InternalError":
			status = http.StatusInternalServerError
		}
		return "", &fakeError{status, queue[0], "fake: " + queue[0]}
	}
	switch action {
	case "CreateFleet":
		return f.createFleet(v)
	case "DescribeInstances":
		return f.describeInstances(v)
	case "TerminateInstances":
		return f.terminateInstances(v)
	case "DescribeInstanceTypeOfferings":
		return f.describeOfferings(v)
	case "DescribeSpotPriceHistory":
		return f.describeSpotPrices(v)
	}
	return "", &fakeError{http.StatusBadRequest, "InvalidAction", "fake EC2 does not serve " + action}
}

// createFleet launches the first override without a launch error, in the
// order sent (the provider sends them by priority), and remembers its
// answer under the client token as EC2 does.
func (f *fakeEC2) createFleet(v url.Values) (string, *fakeError) {
	token := v.Get("ClientToken")
	params := paramsWithout(v, "ClientToken")
	if prev, ok := f.fleets[token]; ok {
		if prev.params != params {
			return "", &fakeError{http.StatusBadRequest, "IdempotentParameterMismatch", "fake: token reused with other parameters"}
		}
		return prev.body, nil
	}
	market := v.Get("TargetCapacitySpecification.DefaultTargetCapacityType")
	lt := x("launchTemplateSpecification",
		tv("launchTemplateName", v.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName")),
		tv("version", v.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version")))
	var errs, launched string
	for _, ov := range indexed(v, "LaunchTemplateConfigs.1.Overrides") {
		typ, zone := ov["InstanceType"], ov["AvailabilityZone"]
		lto := x("launchTemplateAndOverrides", lt, x("overrides", tv("instanceType", typ), tv("availabilityZone", zone)))
		if code := f.LaunchErrors[typ+"/"+zone+"/"+market]; code != "" {
			errs += x("item", lto, tv("lifecycle", market), tv("errorCode", code), tv("errorMessage", "fake: "+code))
			continue
		}
		inst := f.launch(typ, zone, market, tagsOf(v))
		launched = x("item", lto, tv("lifecycle", market), x("instanceIds", tv("item", inst.id)), tv("instanceType", typ))
		break
	}
	body := tv("fleetId", fmt.Sprintf("fleet-%d", len(f.fleets)+1)) + x("errorSet", errs) + x("fleetInstanceSet", launched)
	if f.fleets == nil {
		f.fleets = map[string]fakeFleet{}
	}
	f.fleets[token] = fakeFleet{params, body}
	return body, nil
}

func (f *fakeEC2) launch(typ, zone, market string, tags map[string]string) *fakeInstance {
	inst := &fakeInstance{
		id: fmt.Sprintf("i-%017d", len(f.instances)+1), instanceType: typ, zone: zone,
		state: "pending", tags: tags, pendingFor: f.PendingFor,
		privateIP: fmt.Sprintf("10.0.0.%d", len(f.instances)+1),
	}
	if market == "spot" {
		inst.lifecycle = "spot"
	}
	if f.EndReason != "" {
		inst.state, inst.reason = "terminated", f.EndReason
	}
	f.instances = append(f.instances, inst)
	return inst
}

func (f *fakeEC2) find(id string) *fakeInstance {
	for _, inst := range f.instances {
		if inst.id == id {
			return inst
		}
	}
	return nil
}

func (f *fakeEC2) describeInstances(v url.Values) (string, *fakeError) {
	ids := listed(v, "InstanceId")
	var match []*fakeInstance
	for _, id := range ids {
		inst := f.find(id)
		if inst == nil {
			return "", &fakeError{http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id)}
		}
		if inst.state == "pending" {
			if inst.pendingFor == 0 {
				inst.state = "running"
			}
			inst.pendingFor--
		}
		match = append(match, inst)
	}
	if len(ids) == 0 {
		for _, inst := range f.instances {
			if matchesFilters(inst, filters(v)) {
				match = append(match, inst)
			}
		}
	}
	page, next := pageOf(f.PageSize, match, v.Get("NextToken"))
	var set string
	for i, inst := range page {
		set += x("item", tv("reservationId", fmt.Sprintf("r-%d", i)), tv("ownerId", "123456789012"), x("instancesSet", x("item", inst.xml())))
	}
	return x("reservationSet", set) + next, nil
}

func (inst *fakeInstance) xml() string {
	codes := map[string]string{"pending": "0", "running": "16", "shutting-down": "32", "terminated": "48", "stopping": "64", "stopped": "80"}
	out := tv("instanceId", inst.id) + tv("instanceType", inst.instanceType) +
		x("placement", tv("availabilityZone", inst.zone)) +
		x("instanceState", tv("code", codes[inst.state]), tv("name", inst.state)) +
		tv("launchTime", fakeLaunchTime.Format(time.RFC3339))
	if inst.lifecycle != "" {
		out += tv("instanceLifecycle", inst.lifecycle)
	}
	if inst.privateIP != "" && inst.state != "terminated" {
		out += tv("privateIpAddress", inst.privateIP)
	}
	if inst.reason != "" {
		out += x("stateReason", tv("code", inst.reason), tv("message", inst.reason+": fake"))
	}
	var tags string
	for _, k := range slices.Sorted(maps.Keys(inst.tags)) {
		tags += x("item", tv("key", k), tv("value", inst.tags[k]))
	}
	return out + x("tagSet", tags)
}

func matchesFilters(inst *fakeInstance, fs map[string][]string) bool {
	for name, values := range fs {
		var have string
		switch {
		case name == "instance-state-name":
			have = inst.state
		case strings.HasPrefix(name, "tag:"):
			v, ok := inst.tags[strings.TrimPrefix(name, "tag:")]
			if !ok {
				return false
			}
			have = v
		default:
			return false
		}
		if !slices.Contains(values, have) {
			return false
		}
	}
	return true
}

func (f *fakeEC2) terminateInstances(v url.Values) (string, *fakeError) {
	var set string
	for _, id := range listed(v, "InstanceId") {
		inst := f.find(id)
		if inst == nil {
			return "", &fakeError{http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id)}
		}
		prev := inst.state
		inst.state = "terminated"
		set += x("item", tv("instanceId", id),
			x("currentState", tv("code", "48"), tv("name", "terminated")),
			x("previousState", tv("name", prev)))
	}
	return x("instancesSet", set), nil
}

func (f *fakeEC2) describeOfferings(v url.Values) (string, *fakeError) {
	fs := filters(v)
	var items []string
	for _, typ := range slices.Sorted(maps.Keys(f.Offered)) {
		for _, zone := range f.Offered[typ] {
			if allowed(fs["instance-type"], typ) && allowed(fs["location"], zone) {
				items = append(items, x("item", tv("instanceType", typ), tv("locationType", v.Get("LocationType")), tv("location", zone)))
			}
		}
	}
	page, next := pageOf(f.PageSize, items, v.Get("NextToken"))
	return x("instanceTypeOfferingSet", strings.Join(page, "")) + next, nil
}

func (f *fakeEC2) describeSpotPrices(v url.Values) (string, *fakeError) {
	types, products, zones := listed(v, "InstanceType"), listed(v, "ProductDescription"), filters(v)["availability-zone"]
	var items []string
	for _, sp := range f.SpotPrices {
		if allowed(types, sp.InstanceType) && allowed(products, sp.Product) && allowed(zones, sp.Zone) {
			items = append(items, x("item", tv("instanceType", sp.InstanceType), tv("productDescription", sp.Product),
				tv("spotPrice", sp.Price), tv("timestamp", sp.At.Format(time.RFC3339)), tv("availabilityZone", sp.Zone)))
		}
	}
	page, next := pageOf(f.PageSize, items, v.Get("NextToken"))
	return x("spotPriceHistorySet", strings.Join(page, "")) + next, nil
}

// pageOf cuts items at the NextToken offset and returns the next token
// element, empty on the last page.
func pageOf[T any](size int, items []T, token string) ([]T, string) {
	start, _ := strconv.Atoi(token)
	if size == 0 || start+size >= len(items) {
		return items[min(start, len(items)):], ""
	}
	return items[start : start+size], tv("nextToken", strconv.Itoa(start+size))
}

// callsOf returns the form of every call of action, in order.
func (f *fakeEC2) callsOf(action string) []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []url.Values
	for _, v := range f.calls {
		if v.Get("Action") == action {
			out = append(out, v)
		}
	}
	return out
}

// Query-API decoding: "Name.N" lists, "Name.N.Field" structures and
// "Filter.N.Name" with "Filter.N.Value.M".

func listed(v url.Values, prefix string) []string {
	var out []string
	for i := 1; v.Has(fmt.Sprintf("%s.%d", prefix, i)); i++ {
		out = append(out, v.Get(fmt.Sprintf("%s.%d", prefix, i)))
	}
	return out
}

func indexed(v url.Values, prefix string) []map[string]string {
	var out []map[string]string
	for i := 1; ; i++ {
		p := fmt.Sprintf("%s.%d.", prefix, i)
		m := map[string]string{}
		for k := range v {
			if rest, ok := strings.CutPrefix(k, p); ok {
				m[rest] = v.Get(k)
			}
		}
		if len(m) == 0 {
			return out
		}
		out = append(out, m)
	}
}

func filters(v url.Values) map[string][]string {
	out := map[string][]string{}
	for i := 1; v.Has(fmt.Sprintf("Filter.%d.Name", i)); i++ {
		out[v.Get(fmt.Sprintf("Filter.%d.Name", i))] = listed(v, fmt.Sprintf("Filter.%d.Value", i))
	}
	return out
}

func tagsOf(v url.Values) map[string]string {
	tags := map[string]string{}
	for _, t := range indexed(v, "TagSpecification.1.Tag") {
		tags[t["Key"]] = t["Value"]
	}
	return tags
}

func paramsWithout(v url.Values, skip string) string {
	w := url.Values{}
	for k, vs := range v {
		if k != skip {
			w[k] = vs
		}
	}
	return w.Encode()
}

func allowed(values []string, v string) bool { return len(values) == 0 || slices.Contains(values, v) }

func x(name string, children ...string) string {
	return "<" + name + ">" + strings.Join(children, "") + "</" + name + ">"
}

func tv(name, value string) string { return x(name, esc(value)) }

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// newTestCloud starts f and returns a provider pointed at it, with retries
// that do not wait and a fixed clock.
func newTestCloud(t *testing.T, f *fakeEC2, edit func(*Config)) *Cloud {
	t.Helper()
	if f.CallErrors == nil {
		f.CallErrors = map[string][]string{}
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg := Config{
		Region: "us-east-1", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test",
		LaunchTemplate: LaunchTemplate{Name: "refuel-node", Version: "3"},
		MaxAttempts:    3, MaxBackoff: time.Microsecond, PollInterval: time.Microsecond,
		Clock: func() time.Time { return fakeLaunchTime.Add(time.Hour) },
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

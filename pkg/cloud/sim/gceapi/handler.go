// Package gceapi serves a simulated cloud (package sim) over the subset of
// Compute Engine's REST API (compute/v1) that refuel's gce provider and
// the gcloud CLI use, under /compute/v1/projects/{project}/:
//
//   - zones/{z}/instances: insert, get, list, delete; zones/{z}/instances/
//     bulkInsert; zones/{z}/instances/{i}/simulateMaintenanceEvent;
//     aggregated/instances;
//   - zones, machineTypes, acceleratorTypes (get and list);
//   - zones/{z}/operations: get, wait, list; aggregated/operations; a
//     spot VM the market preempts leaves a compute.instances.preempted
//     operation.
//
// It runs over the same market as the EC2 endpoint (stock, prices,
// quotas, notices): a Compute Engine instance is a sim instance whose ID
// is its name, on a pool of a Compute Engine machine type (AddMarket adds
// them). A spot VM's preemption is a notice of 30 seconds
// (NoticeWindow), during which its status is STOPPING and its metadata
// server's instance/preempted is TRUE; then, with
// instanceTerminationAction DELETE, it is gone. Every instance's metadata
// endpoint (package metadata) answers instance/preempted, id, zone and
// name; an agent process the sim starts for a Compute Engine instance
// finds it through GCE_METADATA_HOST, which the launcher sets.
//
// The sim serves any project id unless WithProjects names some, and asks
// for no credentials. Its simplifications: an instance name is unique
// across zones (the sim's IDs are global); list filters take only terms
// `field = "value"` or `field eq "regexp"` (and their negations) joined
// by AND, on the fields name, status, zone, operationType, targetLink
// and labels.KEY; lists come in one page; a maintenance event migrates an
// on-demand instance live, which changes nothing.
//
// The control plane serves it in-process (--gce-sim ADDR) as worker
// gce-sim does: AddMarket adds the Compute Engine pools to the sim's
// config before sim.New, and Start serves the endpoint on ADDR.
package gceapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	compute "google.golang.org/api/compute/v1"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/metadata"
	"refuel/pkg/cloud/sim"
)

// Handler is the Compute Engine endpoint of one simulated cloud. Safe for
// concurrent use.
type Handler struct {
	cloud    *sim.Cloud
	log      *zap.Logger
	projects map[string]bool // nil: any project
	notice   time.Duration   // a maintenance event's notice to a spot VM
	mux      *http.ServeMux

	mu       sync.Mutex
	base     string                // http://host/compute/v1/ of the latest request
	records  map[string]*record    // instance name → as inserted
	ops      map[string]*operation // by name
	order    []*operation          // oldest first
	requests map[string]*operation // project/zone/requestId → its operation
}

// record is what the API was told of an instance: the sim knows its
// market side, this the rest (labels, metadata, scheduling, disks).
type record struct {
	project, zone string
	body          compute.Instance
	created       time.Time
	preempted     bool // its compute.instances.preempted operation is recorded
}

// operation is a zone operation. One that waits on an instance (an
// insert) is done once the instance leaves PROVISIONING.
type operation struct {
	compute.Operation
	project, zone string
	awaits        string // instance name; "" when done at once
}

// Option configures a Handler.
type Option func(*Handler)

// WithProjects makes the endpoint serve only these project ids, and
// answer for any other what Compute Engine answers for a project that
// does not exist (404): how a wrong --gce-project shows.
func WithProjects(ids ...string) Option {
	return func(h *Handler) {
		h.projects = map[string]bool{}
		for _, id := range ids {
			h.projects[id] = true
		}
	}
}

// WithNoticeWindow sets the notice a simulated maintenance event gives a
// spot VM before it is taken; default NoticeWindow, as on Compute Engine.
func WithNoticeWindow(d time.Duration) Option {
	return func(h *Handler) { h.notice = d }
}

// New returns the Compute Engine endpoint of cloud; log may be nil.
func New(cloud *sim.Cloud, log *zap.Logger, opts ...Option) *Handler {
	if log == nil {
		log = zap.NewNop()
	}
	h := &Handler{cloud: cloud, log: log.Named("gceapi"), notice: NoticeWindow, records: map[string]*record{}, ops: map[string]*operation{}, requests: map[string]*operation{}}
	for _, o := range opts {
		o(h)
	}
	const p = "/compute/v1/projects/{project}"
	h.mux = http.NewServeMux()
	h.mux.HandleFunc("GET "+p, h.project(h.getProject))
	h.mux.HandleFunc("GET "+p+"/zones", h.project(h.listZones))
	h.mux.HandleFunc("GET "+p+"/zones/{zone}", h.zone(h.getZone))
	h.mux.HandleFunc("GET "+p+"/zones/{zone}/machineTypes", h.zone(h.listMachineTypes))
	h.mux.HandleFunc("GET "+p+"/zones/{zone}/machineTypes/{name}", h.zone(h.getMachineType))
	h.mux.HandleFunc("GET "+p+"/zones/{zone}/acceleratorTypes", h.zone(h.listAcceleratorTypes))
	h.mux.HandleFunc("GET "+p+"/zones/{zone}/acceleratorTypes/{name}", h.zone(h.getAcceleratorType))
	h.mux.HandleFunc("POST "+p+"/zones/{zone}/instances", h.zone(h.insert))
	h.mux.HandleFunc("POST "+p+"/zones/{zone}/instances/bulkInsert", h.zone(h.bulkInsert))
	h.mux.HandleFunc("GET "+p+"/zones/{zone}/instances", h.zone(h.listInstances))
	h.mux.HandleFunc("GET "+p+"/zones/{zone}/instances/{name}", h.zone(h.getInstance))
	h.mux.HandleFunc("DELETE "+p+"/zones/{zone}/instances/{name}", h.zone(h.deleteInstance))
	h.mux.HandleFunc("POST "+p+"/zones/{zone}/instances/{name}/simulateMaintenanceEvent", h.zone(h.simulateMaintenance))
	h.mux.HandleFunc("GET "+p+"/aggregated/instances", h.project(h.aggregatedInstances))
	h.mux.HandleFunc("GET "+p+"/zones/{zone}/operations", h.zone(h.listOperations))
	h.mux.HandleFunc("GET "+p+"/zones/{zone}/operations/{name}", h.zone(h.getOperation))
	h.mux.HandleFunc("POST "+p+"/zones/{zone}/operations/{name}/wait", h.zone(h.waitOperation))
	h.mux.HandleFunc("GET "+p+"/aggregated/operations", h.project(h.aggregatedOperations))
	return h
}

// ServeHTTP implements http.Handler. Every request counts as one API call
// for the sim's throttling.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.log.Debug("request", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.String("query", r.URL.RawQuery))
	if err := h.cloud.APICall(); err != nil {
		writeError(w, http.StatusForbidden, gce.ReasonRateLimitExceeded, "Rate Limit Exceeded")
		return
	}
	h.mu.Lock()
	h.base = "http://" + r.Host + "/compute/v1/"
	h.mu.Unlock()
	h.sync()
	h.mux.ServeHTTP(w, r)
}

// call is one request with its project and zone resolved.
type call struct {
	w             http.ResponseWriter
	r             *http.Request
	project, zone string
	base          string // http://host/compute/v1/
}

func (c call) link(parts ...string) string {
	return c.base + "projects/" + c.project + "/" + strings.Join(parts, "/")
}

func (h *Handler) project(f func(call)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := call{w: w, r: r, project: r.PathValue("project"), base: "http://" + r.Host + "/compute/v1/"}
		if h.projects != nil && !h.projects[c.project] {
			writeError(w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s' was not found", c.project)
			return
		}
		f(c)
	}
}

func (h *Handler) zone(f func(call)) http.HandlerFunc {
	return h.project(func(c call) {
		c.zone = c.r.PathValue("zone")
		if _, ok := h.zoneTypes()[c.zone]; !ok {
			writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s' was not found", c.project, c.zone)
			return
		}
		f(c)
	})
}

// zoneTypes are the Compute Engine machine types each zone sells.
func (h *Handler) zoneTypes() map[string][]sim.InstanceType {
	types := map[string]sim.InstanceType{}
	for _, t := range h.cloud.Catalogue() {
		if t.Cloud == sim.CloudGCE {
			types[t.Name] = t
		}
	}
	out := map[string][]sim.InstanceType{}
	for _, ps := range h.cloud.Market().Pools {
		if t, ok := types[ps.InstanceType]; ok {
			out[ps.Zone] = append(out[ps.Zone], t)
		}
	}
	return out
}

func (h *Handler) getProject(c call) {
	n, _ := strconv.ParseUint(metadata.GCEProjectNumber, 10, 64)
	writeJSON(c.w, &compute.Project{Kind: "compute#project", Name: c.project, Id: n, SelfLink: c.base + "projects/" + c.project})
}

func (h *Handler) zoneView(c call, name string) *compute.Zone {
	return &compute.Zone{Kind: "compute#zone", Name: name, Status: "UP", Id: metadata.GCEInstanceID(name) % 10000,
		Region: c.link("regions", gce.RegionOf(name)), SelfLink: c.link("zones", name)}
}

func (h *Handler) listZones(c call) {
	names := make([]string, 0)
	for z := range h.zoneTypes() {
		names = append(names, z)
	}
	sort.Strings(names)
	list := &compute.ZoneList{Kind: "compute#zoneList", Id: "projects/" + c.project + "/zones", SelfLink: c.link("zones")}
	for _, z := range names {
		list.Items = append(list.Items, h.zoneView(c, z))
	}
	writeJSON(c.w, list)
}

func (h *Handler) getZone(c call) { writeJSON(c.w, h.zoneView(c, c.zone)) }

func (h *Handler) machineTypeView(c call, t sim.InstanceType) *compute.MachineType {
	accel, _ := acceleratorOf(t.Name)
	return &compute.MachineType{Kind: "compute#machineType", Name: t.Name, Zone: c.zone, Id: metadata.GCEInstanceID(t.Name) % 100000000,
		GuestCpus: int64(t.VCPUs), MemoryMb: int64(t.MemoryMiB), Description: fmt.Sprintf("%d vCPUs, %d GB RAM, %d %s", t.VCPUs, t.MemoryMiB/1024, t.GPUs, t.GPU),
		Accelerators: []*compute.MachineTypeAccelerators{{GuestAcceleratorType: accel, GuestAcceleratorCount: int64(t.GPUs)}},
		SelfLink:     c.link("zones", c.zone, "machineTypes", t.Name)}
}

func (h *Handler) listMachineTypes(c call) {
	list := &compute.MachineTypeList{Kind: "compute#machineTypeList", SelfLink: c.link("zones", c.zone, "machineTypes")}
	for _, t := range h.zoneTypes()[c.zone] {
		list.Items = append(list.Items, h.machineTypeView(c, t))
	}
	writeJSON(c.w, list)
}

func (h *Handler) getMachineType(c call) {
	for _, t := range h.zoneTypes()[c.zone] {
		if t.Name == c.r.PathValue("name") {
			writeJSON(c.w, h.machineTypeView(c, t))
			return
		}
	}
	writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s/machineTypes/%s' was not found", c.project, c.zone, c.r.PathValue("name"))
}

// acceleratorTypes are the zone's GPU models, as acceleratorTypes names
// them.
func (h *Handler) acceleratorTypes(c call) []*compute.AcceleratorType {
	var out []*compute.AcceleratorType
	seen := map[string]bool{}
	for _, t := range h.zoneTypes()[c.zone] {
		name, _ := acceleratorOf(t.Name)
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, &compute.AcceleratorType{Kind: "compute#acceleratorType", Name: name, Zone: c.link("zones", c.zone),
			Description: "NVIDIA " + t.GPU, MaximumCardsPerInstance: 8, Id: metadata.GCEInstanceID(name) % 100000000,
			SelfLink: c.link("zones", c.zone, "acceleratorTypes", name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (h *Handler) listAcceleratorTypes(c call) {
	writeJSON(c.w, &compute.AcceleratorTypeList{Kind: "compute#acceleratorTypeList", Items: h.acceleratorTypes(c), SelfLink: c.link("zones", c.zone, "acceleratorTypes")})
}

func (h *Handler) getAcceleratorType(c call) {
	for _, a := range h.acceleratorTypes(c) {
		if a.Name == c.r.PathValue("name") {
			writeJSON(c.w, a)
			return
		}
	}
	writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s/acceleratorTypes/%s' was not found", c.project, c.zone, c.r.PathValue("name"))
}

// validName is Compute Engine's rule for resource names.
var validName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// insert creates an instance: at once an operation that is done once the
// instance runs, or done with the market's refusal as its error.
func (h *Handler) insert(c call) {
	var body compute.Instance
	if err := json.NewDecoder(c.r.Body).Decode(&body); err != nil {
		writeError(c.w, http.StatusBadRequest, "parseError", "Invalid JSON payload received: %v", err)
		return
	}
	rid := c.r.URL.Query().Get("requestId")
	if op := h.seen(c, rid); op != nil {
		writeJSON(c.w, h.opView(op))
		return
	}
	op, status, reason, msg := h.create(c, &body, "insert", rid)
	if op == nil {
		writeError(c.w, status, reason, "%s", msg)
		return
	}
	writeJSON(c.w, h.opView(op))
}

// seen is the operation of a requestId already served, or nil.
func (h *Handler) seen(c call, rid string) *operation {
	if rid == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests[c.project+"/"+c.zone+"/"+rid]
}

// create launches one instance on the market. A refusal of the request
// itself returns no operation but an HTTP status, reason and message; a
// refusal of the market is an operation done with its error.
func (h *Handler) create(c call, body *compute.Instance, kind, rid string) (*operation, int, string, string) {
	if !validName.MatchString(body.Name) {
		return nil, http.StatusBadRequest, "invalid", fmt.Sprintf("Invalid value for field 'resource.name': '%s'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})'", body.Name)
	}
	mt := path.Base(body.MachineType)
	if !slices.ContainsFunc(h.zoneTypes()[c.zone], func(t sim.InstanceType) bool { return t.Name == mt }) {
		return nil, http.StatusBadRequest, "invalid", fmt.Sprintf("Invalid value for field 'resource.machineType': '%s'. Machine type with name '%s' does not exist in zone '%s'.", body.MachineType, mt, c.zone)
	}
	market := capacity.OnDemand
	if s := body.Scheduling; s != nil && (s.ProvisioningModel == gce.ProvisioningSpot || s.Preemptible) {
		market = capacity.Spot
	}
	token := ""
	if rid != "" {
		token = "gce/" + c.project + "/" + c.zone + "/" + rid
	}
	st, err := h.cloud.Launch(c.r.Context(), sim.LaunchRequest{
		Token: token, ID: body.Name, Tags: tagsOf(body), Wait: false,
		// Compute Engine's spot VMs have no bid: they are taken on stock alone.
		Offers: []sim.Offer{{Pool: sim.Pool{Zone: c.zone, InstanceType: mt}, Market: market, MaxPrice: math.MaxFloat64}},
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if op := h.requests[c.project+"/"+c.zone+"/"+rid]; rid != "" && op != nil {
		return op, 0, "", "" // a twin of this request won the race
	}
	target := c.link("zones", c.zone, "instances", body.Name)
	op := h.newOpLocked(c, kind, target, body.Name)
	if rid != "" {
		h.requests[c.project+"/"+c.zone+"/"+rid] = op
	}
	if errors.Is(err, sim.ErrIDInUse) {
		delete(h.requests, c.project+"/"+c.zone+"/"+rid)
		h.dropOpLocked(op)
		return nil, http.StatusConflict, gce.ReasonAlreadyExists, fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' already exists", c.project, c.zone, body.Name)
	}
	if err != nil {
		f := capacity.Failures(err)
		class, msg := capacity.Unknown, err.Error()
		if len(f) > 0 {
			class, msg = f[0].Class, f[0].Message
		}
		if class == capacity.Throttled {
			delete(h.requests, c.project+"/"+c.zone+"/"+rid)
			h.dropOpLocked(op)
			return nil, http.StatusForbidden, gce.ReasonRateLimitExceeded, "Rate Limit Exceeded"
		}
		code, status := codeOf(class)
		if class == capacity.NoCapacity {
			msg = fmt.Sprintf("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request. Try a different zone, or try again later. (%s)", c.project, c.zone, msg)
		}
		h.finishLocked(op, &compute.OperationErrorErrors{Code: code, Message: msg}, status)
		return op, 0, "", ""
	}
	b := *body
	h.records[body.Name] = &record{project: c.project, zone: c.zone, body: b, created: st.LaunchedAt}
	op.awaits = body.Name
	h.log.Info("instance inserted", zap.String("instance", body.Name), zap.String("zone", c.zone), zap.String("machine_type", mt), zap.String("market", string(market)))
	return op, 0, "", ""
}

// codeOf is the operation error code and HTTP status Compute Engine gives
// for a class of failure.
func codeOf(class capacity.Class) (string, int) {
	switch class {
	case capacity.NoCapacity:
		return gce.CodeResourcePoolExhausted, http.StatusServiceUnavailable
	case capacity.Quota:
		return gce.CodeQuotaExceeded, http.StatusForbidden
	case capacity.SpecMismatch, capacity.Price:
		return gce.CodeUnsupportedOperation, http.StatusBadRequest
	}
	return "INTERNAL_ERROR", http.StatusInternalServerError
}

// tagsOf are the tags a sim instance carries: refuel's exact ones from
// the metadata, or the labels.
func tagsOf(body *compute.Instance) map[string]string {
	if body.Metadata != nil {
		for _, it := range body.Metadata.Items {
			if it != nil && it.Key == "refuel-tags" && it.Value != nil {
				var tags map[string]string
				if json.Unmarshal([]byte(*it.Value), &tags) == nil {
					return tags
				}
			}
		}
	}
	out := map[string]string{}
	for k, v := range body.Labels {
		out[k] = v
	}
	return out
}

// bulkInsert creates Count instances (at least MinCount) named by
// perInstanceProperties or namePattern (### is the instance's number)
// in one operation; if fewer than MinCount launch, none stays.
func (h *Handler) bulkInsert(c call) {
	var req compute.BulkInsertInstanceResource
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil {
		writeError(c.w, http.StatusBadRequest, "parseError", "Invalid JSON payload received: %v", err)
		return
	}
	rid := c.r.URL.Query().Get("requestId")
	if op := h.seen(c, rid); op != nil {
		writeJSON(c.w, h.opView(op))
		return
	}
	names := slices.Sorted(maps.Keys(req.PerInstanceProperties))
	for i := len(names); int64(i) < req.Count; i++ {
		if !strings.Contains(req.NamePattern, "#") {
			writeError(c.w, http.StatusBadRequest, "invalid", "Invalid value for field 'resource.namePattern': '%s'. It needs # for the instance's number when count exceeds the named instances.", req.NamePattern)
			return
		}
		hashes := strings.Count(req.NamePattern, "#")
		names = append(names, strings.Replace(req.NamePattern, strings.Repeat("#", hashes), fmt.Sprintf("%0*d", hashes, i+1), 1))
	}
	minCount := req.MinCount
	if minCount == 0 {
		minCount = int64(len(names))
	}
	if req.InstanceProperties == nil || len(names) == 0 {
		writeError(c.w, http.StatusBadRequest, "required", "Required field 'resource.instanceProperties' and a count or per-instance names are needed")
		return
	}
	props := req.InstanceProperties
	var launched []string
	var failure *compute.OperationErrorErrors
	var failStatus int
	for _, name := range names {
		body := &compute.Instance{Name: name, MachineType: props.MachineType, Labels: props.Labels, Metadata: props.Metadata, Scheduling: props.Scheduling,
			GuestAccelerators: props.GuestAccelerators, Disks: props.Disks, NetworkInterfaces: props.NetworkInterfaces, ServiceAccounts: props.ServiceAccounts}
		op, status, reason, msg := h.create(c, body, "insert", "")
		switch {
		case op == nil:
			failure, failStatus = &compute.OperationErrorErrors{Code: reason, Message: msg}, status
		case op.Error != nil:
			failure, failStatus = op.Error.Errors[0], int(op.HttpErrorStatusCode)
		default:
			launched = append(launched, name)
		}
	}
	if int64(len(launched)) < minCount {
		for _, name := range launched {
			_, _ = h.cloud.Terminate(name)
			h.mu.Lock()
			delete(h.records, name)
			h.mu.Unlock()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	op := h.newOpLocked(c, "bulkInsert", c.link("zones", c.zone, "instances"), "")
	if rid != "" {
		h.requests[c.project+"/"+c.zone+"/"+rid] = op
	}
	var errs *compute.OperationErrorErrors
	if int64(len(launched)) < minCount {
		errs = failure
	}
	h.finishLocked(op, errs, failStatus)
	writeJSON(c.w, &op.Operation)
}

// instanceLocked is a project's instance in a zone, or nil.
func (h *Handler) instanceLocked(c call, name string) *record {
	rec := h.records[name]
	if rec == nil || rec.project != c.project || rec.zone != c.zone {
		return nil
	}
	return rec
}

func (h *Handler) getInstance(c call) {
	name := c.r.PathValue("name")
	h.mu.Lock()
	rec := h.instanceLocked(c, name)
	h.mu.Unlock()
	if rec == nil {
		writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s/instances/%s' was not found", c.project, c.zone, name)
		return
	}
	st, err := h.cloud.Status(name)
	if err != nil {
		writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s/instances/%s' was not found", c.project, c.zone, name)
		return
	}
	writeJSON(c.w, h.view(c, rec, st))
}

// view is an instance as Compute Engine shows it.
func (h *Handler) view(c call, rec *record, st sim.Status) *compute.Instance {
	inst := rec.body
	inst.Kind = "compute#instance"
	inst.Id = metadata.GCEInstanceID(inst.Name)
	inst.Zone = c.base + "projects/" + rec.project + "/zones/" + rec.zone
	inst.MachineType = inst.Zone + "/machineTypes/" + path.Base(inst.MachineType)
	inst.SelfLink = inst.Zone + "/instances/" + inst.Name
	inst.CreationTimestamp = rec.created.Format("2006-01-02T15:04:05.000-07:00")
	inst.Status = statusOf(st)
	if st.State == capacity.StateInterrupted || st.Reason == sim.ReasonSpotTermination {
		inst.StatusMessage = "Instance was preempted."
	}
	nics := make([]*compute.NetworkInterface, 0, 1)
	for i, n := range inst.NetworkInterfaces {
		nic := *n
		nic.Name, nic.NetworkIP = fmt.Sprintf("nic%d", i), st.Address
		nics = append(nics, &nic)
	}
	if len(nics) == 0 {
		nics = append(nics, &compute.NetworkInterface{Name: "nic0", NetworkIP: st.Address, Network: c.base + "projects/" + rec.project + "/global/networks/default"})
	}
	inst.NetworkInterfaces = nics
	return &inst
}

// statusOf is a sim instance's Compute Engine status.
func statusOf(st sim.Status) string {
	switch st.State {
	case capacity.StatePending:
		return gce.StatusProvisioning
	case capacity.StateRunning:
		return gce.StatusRunning
	case capacity.StateInterrupted:
		return gce.StatusStopping
	}
	return gce.StatusTerminated
}

func (h *Handler) listInstances(c call) {
	match, err := parseFilter(c.r.URL.Query().Get("filter"))
	if err != nil {
		writeError(c.w, http.StatusBadRequest, "invalid", "Invalid list filter expression: %v", err)
		return
	}
	list := &compute.InstanceList{Kind: "compute#instanceList", Id: "projects/" + c.project + "/zones/" + c.zone + "/instances", SelfLink: c.link("zones", c.zone, "instances"), Items: []*compute.Instance{}}
	for _, inst := range h.instances(c, match) {
		if path.Base(inst.Zone) == c.zone {
			list.Items = append(list.Items, inst)
		}
	}
	writeJSON(c.w, list)
}

func (h *Handler) aggregatedInstances(c call) {
	match, err := parseFilter(c.r.URL.Query().Get("filter"))
	if err != nil {
		writeError(c.w, http.StatusBadRequest, "invalid", "Invalid list filter expression: %v", err)
		return
	}
	list := &compute.InstanceAggregatedList{Kind: "compute#instanceAggregatedList", Id: "projects/" + c.project + "/aggregated/instances",
		SelfLink: c.link("aggregated", "instances"), Items: map[string]compute.InstancesScopedList{}}
	// Every zone is listed, as Compute Engine lists it: clients expect items.
	for z := range h.zoneTypes() {
		list.Items["zones/"+z] = compute.InstancesScopedList{Warning: &compute.InstancesScopedListWarning{Code: noResults, Message: "There are no results for scope 'zones/" + z + "' on this page."}}
	}
	for _, inst := range h.instances(c, match) {
		key := "zones/" + path.Base(inst.Zone)
		scoped := list.Items[key]
		scoped.Instances, scoped.Warning = append(scoped.Instances, inst), nil
		list.Items[key] = scoped
	}
	writeJSON(c.w, list)
}

// noResults is the warning of a zone with nothing to list.
const noResults = "NO_RESULTS_ON_PAGE"

// statuses are the sim's instances by ID, from one look at the market.
func (h *Handler) statuses() map[string]sim.Status {
	out := map[string]sim.Status{}
	for _, st := range h.cloud.Instances() {
		out[st.ID] = st
	}
	return out
}

// instances are the project's instances that match, by name.
func (h *Handler) instances(c call, match func(func(string) string) bool) []*compute.Instance {
	h.mu.Lock()
	recs := map[string]*record{}
	for name, rec := range h.records {
		if rec.project == c.project {
			recs[name] = rec
		}
	}
	h.mu.Unlock()
	statuses := h.statuses()
	var out []*compute.Instance
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		st, ok := statuses[name]
		if !ok {
			continue
		}
		inst := h.view(c, recs[name], st)
		if match(func(field string) string { return instanceField(inst, field) }) {
			out = append(out, inst)
		}
	}
	return out
}

func instanceField(inst *compute.Instance, field string) string {
	switch {
	case field == "name":
		return inst.Name
	case field == "status":
		return inst.Status
	case field == "zone":
		return path.Base(inst.Zone)
	case strings.HasPrefix(field, "labels."):
		return inst.Labels[strings.TrimPrefix(field, "labels.")]
	}
	return ""
}

// deleteInstance deletes an instance: done at once, its agent killed.
func (h *Handler) deleteInstance(c call) {
	name := c.r.PathValue("name")
	rid := c.r.URL.Query().Get("requestId")
	if op := h.seen(c, rid); op != nil {
		writeJSON(c.w, h.opView(op))
		return
	}
	h.mu.Lock()
	rec := h.instanceLocked(c, name)
	h.mu.Unlock()
	if rec == nil {
		writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s/instances/%s' was not found", c.project, c.zone, name)
		return
	}
	_, _ = h.cloud.Terminate(name)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.records, name)
	op := h.newOpLocked(c, "delete", c.link("zones", c.zone, "instances", name), "")
	if rid != "" {
		h.requests[c.project+"/"+c.zone+"/"+rid] = op
	}
	h.finishLocked(op, nil, 0)
	h.log.Info("instance deleted", zap.String("instance", name), zap.String("zone", c.zone))
	writeJSON(c.w, &op.Operation)
}

// simulateMaintenance is a host maintenance event: a spot VM is preempted
// (its notice served, taken NoticeWindow later), as on Compute Engine; an
// on-demand instance migrates live, which changes nothing here.
func (h *Handler) simulateMaintenance(c call) {
	name := c.r.PathValue("name")
	h.mu.Lock()
	rec := h.instanceLocked(c, name)
	h.mu.Unlock()
	if rec == nil {
		writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s/instances/%s' was not found", c.project, c.zone, name)
		return
	}
	if s := rec.body.Scheduling; s != nil && (s.ProvisioningModel == gce.ProvisioningSpot || s.Preemptible) {
		if _, err := h.cloud.Interrupt(name, h.notice); err != nil {
			writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s/instances/%s' was not found", c.project, c.zone, name)
			return
		}
		h.sync()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	op := h.newOpLocked(c, "simulateMaintenanceEvent", c.link("zones", c.zone, "instances", name), "")
	h.finishLocked(op, nil, 0)
	writeJSON(c.w, &op.Operation)
}

// sync brings the records up to the market: a spot VM under notice or
// taken gets its compute.instances.preempted operation, and one taken
// with instanceTerminationAction DELETE, or forgotten by the sim, is gone.
func (h *Handler) sync() {
	statuses := h.statuses()
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, rec := range h.records {
		st, ok := statuses[name]
		if !ok {
			delete(h.records, name)
			continue
		}
		preempted := st.State == capacity.StateInterrupted || st.State == capacity.StateTerminated && st.Reason == sim.ReasonSpotTermination
		if preempted && !rec.preempted {
			rec.preempted = true
			c := call{project: rec.project, zone: rec.zone, base: h.base}
			op := h.newOpLocked(c, gce.OperationPreempted, c.link("zones", rec.zone, "instances", name), "")
			op.TargetId = metadata.GCEInstanceID(name)
			op.StatusMessage = "Instance was preempted."
			op.User = "system"
			h.finishLocked(op, nil, 0)
			h.log.Info("instance preempted", zap.String("instance", name), zap.String("zone", rec.zone))
		}
		deleteOnEnd := rec.body.Scheduling == nil || rec.body.Scheduling.InstanceTerminationAction != "STOP"
		if st.State == capacity.StateTerminated && preempted && deleteOnEnd {
			delete(h.records, name)
		}
	}
}

// parseFilter reads a list filter of terms joined by AND; an empty one
// matches everything.
func parseFilter(f string) (func(get func(string) string) bool, error) {
	f = strings.TrimSpace(f)
	if f == "" {
		return func(func(string) string) bool { return true }, nil
	}
	type term struct {
		field  string
		match  func(string) bool
		negate bool
	}
	var terms []term
	for _, part := range regexp.MustCompile(`\s+(?i:AND)\s+`).Split(f, -1) {
		m := filterTerm.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			return nil, fmt.Errorf("%q: the sim takes terms field = \"value\" joined by AND", part)
		}
		v := m[3]
		if strings.HasPrefix(v, `"`) {
			// The quotes hold the value as it is (a regexp keeps its
			// backslashes); only an escaped quote is unescaped.
			v = strings.ReplaceAll(v[1:len(v)-1], `\"`, `"`)
		}
		t := term{field: m[1], negate: m[2] == "!=" || m[2] == "ne"}
		if m[2] == "eq" || m[2] == "ne" {
			re, err := regexp.Compile("^(?:" + v + ")$")
			if err != nil {
				return nil, fmt.Errorf("%q: %v", part, err)
			}
			t.match = re.MatchString
		} else {
			want := v
			t.match = func(s string) bool { return s == want }
		}
		terms = append(terms, t)
	}
	return func(get func(string) string) bool {
		for _, t := range terms {
			if t.match(get(t.field)) == t.negate {
				return false
			}
		}
		return true
	}, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers as Compute Engine does when it refuses a request.
func writeError(w http.ResponseWriter, status int, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": status, "message": msg,
		"errors": []map[string]string{{"domain": "global", "reason": reason, "message": msg}},
	}})
}

// Server is the Compute Engine endpoint served on an address.
type Server struct {
	Handler *Handler
	srv     *http.Server
	ln      net.Listener
}

// Start serves cloud's Compute Engine endpoint on addr (host:port; port 0
// picks a free one) until Close: what worker gce-sim and the control
// plane's --gce-sim run. extra, when not nil, is served beside it for
// every path outside /compute/ (the sim's /sim/ controls).
func Start(cloud *sim.Cloud, addr string, log *zap.Logger, extra http.Handler, opts ...Option) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	h := New(cloud, log, opts...)
	mux := http.NewServeMux()
	mux.Handle("/compute/", h)
	if extra != nil {
		mux.Handle("/", extra)
	}
	s := &Server{Handler: h, ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Error("Compute Engine endpoint stopped", zap.Error(err))
		}
	}()
	return s, nil
}

// Addr is the address served, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Endpoint is the URL a Compute Engine client's endpoint is set to (gce
// Config.Endpoint, --gce-endpoint, CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE).
func (s *Server) Endpoint() string { return "http://" + s.Addr() + "/compute/v1/" }

// Close stops serving; the cloud is its owner's to close.
func (s *Server) Close() error { return s.srv.Close() }

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
	"net"
	"net/http"
	"path"
	"regexp"
	"slices"
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

// validName is Compute Engine's rule for resource names.
var validName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

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

package gceapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"path"
	"slices"
	"strings"

	"go.uber.org/zap"
	compute "google.golang.org/api/compute/v1"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/sim"
)

// Creating instances: insert and bulkInsert, idempotent in their requestId,
// placed on the simulated market, refused with Compute Engine's error codes.

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

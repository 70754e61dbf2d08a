// The sim's zone operations: made, finished, waited for, listed and
// filtered, as Compute Engine answers them.

package gceapi

import (
	"context"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	compute "google.golang.org/api/compute/v1"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/metadata"
)

func (h *Handler) newOpLocked(c call, kind, target, awaits string) *operation {
	now := time.Now()
	id := uuid.New()
	name := "operation-" + strconv.FormatInt(now.UnixMilli(), 10) + "-" + id.String()[:8]
	op := &operation{project: c.project, zone: c.zone, awaits: awaits}
	op.Operation = compute.Operation{
		Kind: "compute#operation", Name: name, Id: uint64(id.ID()), OperationType: kind, Status: "RUNNING", Progress: 0,
		TargetLink: target, TargetId: metadata.GCEInstanceID(path.Base(target)), User: "refuel-sim",
		InsertTime: now.Format(time.RFC3339Nano), StartTime: now.Format(time.RFC3339Nano),
		Zone:     "projects/" + c.project + "/zones/" + c.zone,
		SelfLink: "projects/" + c.project + "/zones/" + c.zone + "/operations/" + name,
	}
	if c.base != "" {
		op.Zone, op.SelfLink = c.base+op.Zone, c.base+op.SelfLink
	}
	h.ops[name] = op
	h.order = append(h.order, op)
	return op
}

func (h *Handler) dropOpLocked(op *operation) {
	delete(h.ops, op.Name)
	h.order = slices.DeleteFunc(h.order, func(o *operation) bool { return o == op })
}

func (h *Handler) finishLocked(op *operation, e *compute.OperationErrorErrors, status int) {
	op.Status, op.Progress, op.EndTime = "DONE", 100, time.Now().Format(time.RFC3339Nano)
	op.awaits = ""
	if e != nil {
		op.Error = &compute.OperationError{Errors: []*compute.OperationErrorErrors{e}}
		op.HttpErrorStatusCode, op.HttpErrorMessage = int64(status), strings.ToUpper(http.StatusText(status))
	}
}

// opView is an operation as it stands: one waiting on an instance is done
// once the instance left PROVISIONING.
func (h *Handler) opView(op *operation) *compute.Operation {
	h.mu.Lock()
	awaits := op.awaits
	h.mu.Unlock()
	if awaits != "" {
		if st, err := h.cloud.Status(awaits); err != nil || st.State != capacity.StatePending {
			h.mu.Lock()
			if op.awaits != "" {
				h.finishLocked(op, nil, 0)
			}
			h.mu.Unlock()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	v := op.Operation
	return &v
}

func (h *Handler) operation(c call) *operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	op := h.ops[c.r.PathValue("name")]
	if op == nil || op.project != c.project || op.zone != c.zone {
		writeError(c.w, http.StatusNotFound, gce.ReasonNotFound, "The resource 'projects/%s/zones/%s/operations/%s' was not found", c.project, c.zone, c.r.PathValue("name"))
		return nil
	}
	return op
}

func (h *Handler) getOperation(c call) {
	if op := h.operation(c); op != nil {
		writeJSON(c.w, h.opView(op))
	}
}

// maxWait is how long operations.wait waits at most, as on Compute Engine.
const maxWait = 2 * time.Minute

// waitOperation answers once the operation is done, or after maxWait.
func (h *Handler) waitOperation(c call) {
	op := h.operation(c)
	if op == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), maxWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		v := h.opView(op)
		if v.Status == "DONE" {
			writeJSON(c.w, v)
			return
		}
		select {
		case <-ctx.Done():
			writeJSON(c.w, v)
			return
		case <-tick.C:
		}
	}
}

func (h *Handler) listOperations(c call) {
	match, err := parseFilter(c.r.URL.Query().Get("filter"))
	if err != nil {
		writeError(c.w, http.StatusBadRequest, "invalid", "Invalid list filter expression: %v", err)
		return
	}
	h.mu.Lock()
	var ops []*operation
	for _, op := range h.order {
		if op.project == c.project && op.zone == c.zone {
			ops = append(ops, op)
		}
	}
	h.mu.Unlock()
	list := &compute.OperationList{Kind: "compute#operationList", Id: "projects/" + c.project + "/zones/" + c.zone + "/operations", SelfLink: c.link("zones", c.zone, "operations"), Items: []*compute.Operation{}}
	for _, op := range ops {
		v := h.opView(op)
		if match(func(field string) string { return operationField(v, field) }) {
			list.Items = append(list.Items, v)
		}
	}
	writeJSON(c.w, list)
}

func (h *Handler) aggregatedOperations(c call) {
	match, err := parseFilter(c.r.URL.Query().Get("filter"))
	if err != nil {
		writeError(c.w, http.StatusBadRequest, "invalid", "Invalid list filter expression: %v", err)
		return
	}
	h.mu.Lock()
	var ops []*operation
	for _, op := range h.order {
		if op.project == c.project {
			ops = append(ops, op)
		}
	}
	h.mu.Unlock()
	list := &compute.OperationAggregatedList{Kind: "compute#operationAggregatedList", Id: "projects/" + c.project + "/aggregated/operations",
		SelfLink: c.link("aggregated", "operations"), Items: map[string]compute.OperationsScopedList{}}
	for z := range h.zoneTypes() {
		list.Items["zones/"+z] = compute.OperationsScopedList{Warning: &compute.OperationsScopedListWarning{Code: noResults, Message: "There are no results for scope 'zones/" + z + "' on this page."}}
	}
	for _, op := range ops {
		v := h.opView(op)
		if match(func(field string) string { return operationField(v, field) }) {
			scoped := list.Items["zones/"+op.zone]
			scoped.Operations, scoped.Warning = append(scoped.Operations, v), nil
			list.Items["zones/"+op.zone] = scoped
		}
	}
	writeJSON(c.w, list)
}

func operationField(op *compute.Operation, field string) string {
	switch field {
	case "name":
		return op.Name
	case "status":
		return op.Status
	case "operationType":
		return op.OperationType
	case "targetLink":
		return op.TargetLink
	case "zone":
		return path.Base(op.Zone)
	}
	return ""
}

// filterTerm matches `field = "value"` (equal), `field eq "regexp"` (the
// whole value matches, RE2) or their negations != and ne, parenthesized
// or not.
var filterTerm = regexp.MustCompile(`^\(?\s*([A-Za-z][A-Za-z0-9_.\-]*)\s*(=|!=|eq|ne)\s*("(?:[^"\\]|\\.)*"|[^\s()]+)\s*\)?$`)

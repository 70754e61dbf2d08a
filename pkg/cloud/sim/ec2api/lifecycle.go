package ec2api

import (
	"context"
	"encoding/xml"
	"errors"
	"maps"
	"strings"

	"refuel/pkg/capacity"
)

// After launch: TerminateInstances, StopInstances, StartInstances and
// CreateTags on instances the simulated market placed.

type terminateInstancesResponse struct {
	XMLName xml.Name `xml:"TerminateInstancesResponse"`
	meta
	Instances []stateChangeXML `xml:"instancesSet>item"`
}

type stateChangeXML struct {
	InstanceID string   `xml:"instanceId"`
	Current    stateXML `xml:"currentState"`
	Previous   stateXML `xml:"previousState"`
}

func (h *Handler) terminateInstances(_ context.Context, p *params) (response, error) {
	ids := p.list("InstanceId")
	if len(ids) == 0 {
		return nil, missing("InstanceId")
	}
	dryRun, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	if _, err := h.findInstances(ids); err != nil {
		return nil, err
	}
	if err := checkRequest(p, dryRun); err != nil {
		return nil, err
	}
	resp := &terminateInstancesResponse{}
	for _, id := range ids {
		prev, err := h.cloud.Terminate(id)
		if err != nil {
			return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
		change := stateChangeXML{InstanceID: id, Current: shuttingDown, Previous: ec2State(prev)}
		if prev == capacity.StateTerminated {
			change.Current = ec2State(prev)
		}
		resp.Instances = append(resp.Instances, change)
	}
	return resp, nil
}

type createTagsResponse struct {
	XMLName xml.Name `xml:"CreateTagsResponse"`
	meta
	Return bool `xml:"return"`
}

// createTags tags instances, the one resource the sim has.
func (h *Handler) createTags(_ context.Context, p *params) (response, error) {
	ids := p.list("ResourceId")
	if len(ids) == 0 {
		return nil, missing("ResourceId")
	}
	tags, err := p.tags("Tag")
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		return nil, missing("Tag")
	}
	dryRun, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") {
			return nil, errorf("InvalidID", "The ID '%s' is not valid", id)
		}
	}
	found, err := h.findInstances(ids)
	if err != nil {
		return nil, err
	}
	for _, st := range found {
		merged := maps.Clone(st.Tags)
		if merged == nil {
			merged = map[string]string{}
		}
		maps.Copy(merged, tags)
		if len(merged) > maxTags {
			return nil, errorf("TagLimitExceeded", "The maximum number of Tags for a resource (%d) has been reached: %s", maxTags, st.ID)
		}
	}
	if err := checkRequest(p, dryRun); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := h.cloud.Tag(id, tags); err != nil {
			return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
	}
	return &createTagsResponse{Return: true}, nil
}

type stopInstancesResponse struct {
	XMLName xml.Name `xml:"StopInstancesResponse"`
	meta
	Instances []stateChangeXML `xml:"instancesSet>item"`
}

type startInstancesResponse struct {
	XMLName xml.Name `xml:"StartInstancesResponse"`
	meta
	Instances []stateChangeXML `xml:"instancesSet>item"`
}

// stopInstances stops on-demand instances, keeping their volumes; a spot
// instance is refused as EC2 refuses one that is not persistent.
func (h *Handler) stopInstances(_ context.Context, p *params) (response, error) {
	ids, err := h.stateChangeIDs(p)
	if err != nil {
		return nil, err
	}
	resp := &stopInstancesResponse{}
	for _, id := range ids {
		prev, err := h.cloud.StopInstance(id)
		var ns *capacity.NotStoppableError
		switch {
		case errors.As(err, &ns):
			return nil, errorf("UnsupportedOperation", "The instance '%s' is a spot instance and cannot be stopped.", id)
		case err != nil:
			return nil, errorf("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be stopped.", id)
		}
		resp.Instances = append(resp.Instances, stateChangeXML{InstanceID: id, Current: ec2State(capacity.StateStopped), Previous: ec2State(prev)})
	}
	return resp, nil
}

// startInstances starts stopped instances: they are pending for the
// sim's start time, then run.
func (h *Handler) startInstances(_ context.Context, p *params) (response, error) {
	ids, err := h.stateChangeIDs(p)
	if err != nil {
		return nil, err
	}
	resp := &startInstancesResponse{}
	for _, id := range ids {
		prev, _, err := h.cloud.StartInstance(id)
		if err != nil {
			return nil, errorf("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be started.", id)
		}
		current := ec2State(prev)
		if prev == capacity.StateStopped {
			current = ec2State(capacity.StatePending)
		}
		resp.Instances = append(resp.Instances, stateChangeXML{InstanceID: id, Current: current, Previous: ec2State(prev)})
	}
	return resp, nil
}

// stateChangeIDs are the instances a Stop or Start names, each known, once
// the request may go ahead.
func (h *Handler) stateChangeIDs(p *params) ([]string, error) {
	ids := p.list("InstanceId")
	if len(ids) == 0 {
		return nil, missing("InstanceId")
	}
	dryRun, err := p.boolean("DryRun")
	if err != nil {
		return nil, err
	}
	if _, err := h.findInstances(ids); err != nil {
		return nil, err
	}
	return ids, checkRequest(p, dryRun)
}

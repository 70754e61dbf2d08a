package aws

import (
	"context"
	"testing"

	"refuel/pkg/capacity"
	"refuel/pkg/cloud/metadata"
)

// Through the real SDK against the sim's EC2 endpoint, an instance the
// provider acquires, describes or lists has the private address its peers
// reach it at: loopback, where the sim's instances run.
func TestAddressFromTheSimEndpoint(t *testing.T) {
	c := simEndpoint(t, nil)
	ctx := context.Background()
	inst, err := c.Acquire(ctx, capacity.Request{RunID: "run-1", Attempt: 1, Offerings: []capacity.Offering{offer("p3.2xlarge", "us-east-1a", capacity.Spot, 0.97)}})
	if err != nil {
		t.Fatal(err)
	}
	if inst.Address != metadata.Loopback {
		t.Errorf("acquired instance has address %q; want %s", inst.Address, metadata.Loopback)
	}
	described, _, err := c.Describe(ctx, inst.ID)
	if err != nil || described.Address != metadata.Loopback {
		t.Errorf("described instance has address %q (%v); want %s", described.Address, err, metadata.Loopback)
	}
	listed, err := c.List(ctx, map[string]string{capacity.TagRun: "run-1"})
	if err != nil || len(listed) != 1 || listed[0].Address != metadata.Loopback {
		t.Errorf("List = %+v, %v; want the instance with address %s", listed, err, metadata.Loopback)
	}
}

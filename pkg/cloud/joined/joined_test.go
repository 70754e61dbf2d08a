package joined

import (
	"context"
	"testing"

	"refuel/pkg/capacity"
)

type fakeDirectory map[string]Machine

func (d fakeDirectory) Machine(_ context.Context, name string) (Machine, error) {
	m, ok := d[name]
	if !ok {
		return Machine{}, &NotJoinedError{name}
	}
	return m, nil
}

func TestAcquireAndDescribe(t *testing.T) {
	dir := fakeDirectory{
		"here": {Name: "here", TaskQueue: "refuel-node-here", Present: true},
		"gone": {Name: "gone", TaskQueue: "refuel-node-gone"},
	}
	c := New("base", dir)
	o := capacity.Offering{Provider: "base", InstanceType: "a100-1x", Market: capacity.Base, GPUs: 1}
	cases := map[string]struct {
		node      string
		wantClass capacity.Class
		wantState capacity.State
	}{
		"present":     {node: "here", wantState: capacity.StateRunning},
		"lost":        {node: "gone", wantClass: capacity.NoCapacity},
		"never":       {node: "never", wantClass: capacity.NoCapacity},
		"no node tag": {node: "", wantClass: capacity.SpecMismatch},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := capacity.Request{RunID: "r", Identity: "id", Attempt: 1, Offerings: []capacity.Offering{o}, Tags: map[string]string{capacity.TagNode: tc.node}}
			inst, err := c.Acquire(context.Background(), req)
			if tc.wantClass != "" {
				if got := capacity.ClassOf(err); got != tc.wantClass {
					t.Fatalf("class %q, want %q (%v)", got, tc.wantClass, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			again, _ := c.Acquire(context.Background(), req)
			if again.ID != inst.ID || inst.TaskQueue != "refuel-node-here" || inst.Tags[capacity.TagJoined] == "" {
				t.Errorf("instance %+v, again %+v", inst, again)
			}
			if _, st, err := c.Describe(context.Background(), inst.ID); err != nil || st != tc.wantState {
				t.Errorf("described %s, %v", st, err)
			}
			dir[tc.node] = Machine{Name: tc.node}
			if _, st, _ := c.Describe(context.Background(), inst.ID); st != capacity.StateTerminated {
				t.Errorf("after the machine was lost: %s", st)
			}
		})
	}
}

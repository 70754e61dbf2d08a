package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"refuel/pkg/pool"
	"refuel/pkg/spec"
)

// Joined machines are base machines placed on like the file's: runs
// fill them before burst, and one draining or gone gives its runs up and
// takes nothing new.
func TestJoinedMachines(t *testing.T) {
	c := config(0, spot)
	c.Base = pool.BaseGroup{Name: "dc", Provider: "base", Join: true, TokenFile: "/t"}
	j1 := pool.Node{Name: "j1", InstanceType: "a100-1x", GPUs: 1}
	j2 := pool.Node{Name: "j2", InstanceType: "a100-1x", GPUs: 1}
	cases := map[string]struct {
		j2         NodeState
		wantLayers []string
		wantMoved  []string
	}{
		"both ready":  {NodeReady, []string{"a:base:j1", "b:base:j2", "c:burst:"}, nil},
		"j2 draining": {NodeDraining, []string{"a:base:j1", "b:base:j2", "c:burst:"}, []string{"b"}},
		"j2 lost":     {NodeLost, []string{"a:base:j1", "b:base:j2", "c:burst:"}, []string{"b"}},
		"j2 left":     {NodeLeft, []string{"a:base:j1", "b:base:j2", "c:burst:"}, []string{"b"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(c)
			s.SetJoined(j1, NodeReady)
			s.SetJoined(j2, NodeReady)
			mustEnqueue(t, s, t0, job("a", 50, 1, spec.TierFlexible), job("b", 50, 1, spec.TierFlexible), job("c", 50, 1, spec.TierFlexible))
			var got []string
			for _, a := range s.Admit(t0, nil) {
				got = append(got, a.Request.ID+":"+string(a.Layer)+":"+a.Node)
			}
			if diff := cmp.Diff(got, tc.wantLayers); diff != "" {
				t.Fatalf("placed got(-), want(+):\n%s", diff)
			}
			moved := ids(s.SetJoined(j2, tc.j2), allocID)
			if diff := cmp.Diff(moved, tc.wantMoved, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("moved got(-), want(+):\n%s", diff)
			}
			for _, a := range moved {
				if err := s.MarkYielding(a); err != nil {
					t.Fatal(err)
				}
				if err := s.Requeue(a, t0); err != nil {
					t.Fatal(err)
				}
			}
			for _, a := range s.Admit(t0, nil) {
				if a.Node == "j2" {
					t.Errorf("%s placed on j2, which is %s", a.Request.ID, tc.j2)
				}
			}
			s.Reconfigure(c) // the pools file read again keeps what joined
			if want := map[bool]int{true: 2, false: 1}[tc.j2 == NodeReady]; len(s.Nodes) != want {
				t.Errorf("%d base machines after reconfiguring, want %d", len(s.Nodes), want)
			}
		})
	}
}

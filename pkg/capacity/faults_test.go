package capacity

import "testing"

func TestFaultRemedies(t *testing.T) {
	for _, tc := range []struct {
		f                             Fault
		restarts, preemption, teaches bool
		cure                          Cure
	}{
		{TrainerFault, true, false, true, RestartTrainer},
		{AgentFault, true, true, true, NewInstance},
		{InstanceLost, true, true, true, NewInstance},
		{ControlPlane, false, false, false, Reattach},
		{NodeLost, false, false, false, OtherMachine},
		{"from-a-later-build", true, true, true, NewInstance},
	} {
		r := tc.f.Remedy()
		if r.Restarts != tc.restarts || r.Preemption != tc.preemption || r.Teaches != tc.teaches || r.Cure != tc.cure {
			t.Errorf("%s: %+v; want restarts %v, preemption %v, teaches %v, cure %d", tc.f, r, tc.restarts, tc.preemption, tc.teaches, tc.cure)
		}
		if r.Restarts && (r.Verdict == "" || r.Type == "") {
			t.Errorf("%s counts against max_restarts but names no verdict or type", tc.f)
		}
	}
	if len(Faults) != len(faultRemedies) {
		t.Errorf("Faults lists %d faults; the table holds %d", len(Faults), len(faultRemedies))
	}
}

// A release reason teaches the market memory unless it is a fault that
// says nothing of the market.
func TestTeaches(t *testing.T) {
	for reason, want := range map[string]bool{"preempted": true, "completed": true, "failed": true,
		"instance-lost": true, "control-plane": false, "node-lost": false} {
		if got := Teaches(reason); got != want {
			t.Errorf("Teaches(%q) = %v; want %v", reason, got, want)
		}
	}
}

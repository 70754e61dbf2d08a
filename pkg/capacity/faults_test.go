package capacity

import "testing"

func TestFaultRemedies(t *testing.T) {
	for _, tc := range []struct {
		f                             Fault
		restarts, preemption, teaches bool
		cure                          Cure
		key                           string
	}{
		{TrainerFault, true, false, true, RestartTrainer, "trainer"},
		{AgentFault, true, true, true, NewInstance, "agent"},
		{InstanceLost, true, true, true, NewInstance, "instance_lost"},
		{ControlPlane, false, false, false, Reattach, "control-plane"},
		{NodeLost, false, false, false, OtherMachine, "node-lost"},
		{CheckpointFault, false, false, true, NoCure, ""},
		{"from-a-later-build", true, true, true, NewInstance, "instance_lost"},
	} {
		r := tc.f.Remedy()
		if r.Restarts != tc.restarts || r.Preemption != tc.preemption || r.Teaches != tc.teaches || r.Cure != tc.cure || r.Key != tc.key {
			t.Errorf("%s: %+v; want restarts %v, preemption %v, teaches %v, cure %d, key %q", tc.f, r, tc.restarts, tc.preemption, tc.teaches, tc.cure, tc.key)
		}
		if r.Restarts && r.Key == "" {
			t.Errorf("%s counts against max_restarts but has no key in status.restarts", tc.f)
		}
		if f, ok := FaultOfKey(r.Key); r.Key != "" && (!ok || f != tc.f.Known()) {
			t.Errorf("FaultOfKey(%q) = %q, %v; want %q", r.Key, f, ok, tc.f.Known())
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

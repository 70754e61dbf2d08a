package capacitypool

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/admission"
	"refuel/pkg/pool"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// The pool places on a machine once it joined, before burst; asks the
// run on it to move when it drains or is lost; and takes no machine
// while its pools file lets none join.
func TestPoolPlacesOnJoinedMachines(t *testing.T) {
	t.Parallel()
	m := pool.Node{Name: "gpu-01", InstanceType: "gpu.1x", GPUs: 1}
	cases := map[string]struct {
		join  bool
		then  admission.NodeState
		want  []string
		cause string
	}{
		"drained": {join: true, then: admission.NodeDraining, want: []string{"grant a base", "grant b burst", "yield a"}, cause: "draining"},
		"lost":    {join: true, then: admission.NodeLost, want: []string{"grant a base", "grant b burst", "yield a"}, cause: "node-lost"},
		"no join": {join: false, then: admission.NodeLost, want: []string{"grant a burst"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := &poolRecorder{}
			env := newPoolEnv(t, rec)
			c := poolConfig()
			c.Base = pool.BaseGroup{Name: "dc", Provider: "base", Join: tc.join}
			if tc.join {
				c.Base.TokenFile = "/t"
			}
			signalAt(env, time.Second, workflows.SignalPoolNode, NodeChange{Node: m, State: admission.NodeReady})
			signalAt(env, 2*time.Second, workflows.SignalPoolRequest, training("a", 50, spec.TierFlexible))
			signalAt(env, 3*time.Second, workflows.SignalPoolRequest, training("b", 50, spec.TierFlexible))
			signalAt(env, 4*time.Second, workflows.SignalPoolNode, NodeChange{Node: m, State: tc.then})
			env.RegisterDelayedCallback(env.CancelWorkflow, 5*time.Second)
			env.ExecuteWorkflow(workflows.CapacityPoolName, PoolInput{Config: c})
			if diff := cmp.Diff(rec.list(), tc.want); diff != "" {
				t.Errorf("what the pool told holders, got(-), want(+):\n%s", diff)
			}
			if _, ys := rec.taken(); tc.cause != "" && (len(ys) != 1 || !strings.Contains(ys[0].Reason, tc.cause)) {
				t.Errorf("yields %+v; want one saying %q", ys, tc.cause)
			}
		})
	}
}

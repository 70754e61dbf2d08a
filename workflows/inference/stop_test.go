package inference

import (
	"testing"
	"time"

	"refuel/pkg/spec"
	"refuel/workflows"
	"refuel/workflows/internal/fakecloud"
)

// A stopped service says since when, and that it wants no replicas.
func TestAStoppedServiceSaysSinceWhenAndWantsNothing(t *testing.T) {
	t.Parallel()
	env := newServiceEnv(t, &serviceCloud{Cloud: &fakecloud.Cloud{}}, &fakePool{})
	st := runUntilCancelled(t, env, 10*time.Minute, serviceSpec(func(s *spec.ServiceSpec) { s.MinReplicas, s.WarmPool = 2, 1 }))
	if st.State != workflows.StateStopped || st.StoppedAt == nil || st.StoppedAt.Sub(st.StartedAt) != 10*time.Minute {
		t.Errorf("state %s, started %s, stopped %v; want stopped 10 minutes after the start", st.State, st.StartedAt, st.StoppedAt)
	}
	if d := st.Desired; d.Replicas != 0 || d.Warm != 0 || d.Reason != "stopped" {
		t.Errorf("desired %+v; want no replicas and no warm ones, as stopped", d)
	}
}

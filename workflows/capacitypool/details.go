package capacitypool

import (
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/pkg/admission"
	"refuel/pkg/pool"
)

// PoolSummary is the capacity pool's one line in the Web UI's workflow
// list: what it was started with.
func PoolSummary(c pool.Config) string {
	gpus := 0
	nodes := c.Base.Inventory()
	for _, n := range nodes {
		gpus += n.GPUs
	}
	return "capacity pool: " + strconv.Itoa(len(nodes)) + " base machines (" + strconv.Itoa(gpus) + " GPUs), " +
		strconv.Itoa(len(c.Burst)) + " burst pools"
}

// poolDetailsEvery is the least workflow time between two refreshes of
// the pool's current details: a pool taking thousands of signals a minute
// does not sort its queue for the Web UI on every one.
const poolDetailsEvery = 2 * time.Second

// poolShownWaiting is how many of the queue's requests the details list.
const poolShownWaiting = 10

// ShowDetails keeps what the Web UI shows as the pool's current details
// up to date, at most every poolDetailsEvery: base and burst in use, and
// the queue in admission order with why each request waits.
func (p *capacityPool) ShowDetails(ctx workflow.Context) {
	now := workflow.Now(ctx)
	if !p.detailsAt.IsZero() && now.Sub(p.detailsAt) < poolDetailsEvery {
		return
	}
	p.detailsAt = now
	workflow.SetCurrentDetails(ctx, poolDetails(p.state, p.Status(ctx), now))
}

// poolDetails is the pool now, as markdown a person reads at a glance;
// st is its status, whose queue says why each request waits.
func poolDetails(s *admission.State, st Status, now time.Time) string {
	lines := []string{"**base** " + strconv.Itoa(st.BaseGPUs-st.FreeBaseGPUs) + " of " + strconv.Itoa(st.BaseGPUs) + " GPUs in use (" +
		strconv.Itoa(st.Base) + " instances) · **burst** " + strconv.Itoa(st.Burst) + " instances · **" + strconv.Itoa(len(st.Waiting)) +
		" waiting** · preemptions " + strconv.Itoa(st.Preemptions) + " · moves to base " + strconv.Itoa(st.Moves)}
	held := map[string]int{}
	for _, a := range st.Running {
		if a.Layer == admission.BurstLayer {
			held[a.Pool] += a.NodeCount()
		}
	}
	var pools []string
	for _, b := range s.Config.Burst {
		in := strconv.Itoa(held[b.Name])
		if b.MaxInstances > 0 {
			in += " of " + strconv.Itoa(b.MaxInstances)
		}
		pools = append(pools, b.Name+" "+in)
	}
	if len(pools) > 0 {
		lines = append(lines, "burst pools: "+strings.Join(pools, " · "))
	}
	if len(st.Waiting) == 0 {
		return strings.Join(append(lines, "queue empty"), "  \n")
	}
	lines = append(lines, "queue, in admission order:")
	for i, q := range st.Waiting[:min(len(st.Waiting), poolShownWaiting)] {
		r := q.Request
		lines = append(lines, strconv.Itoa(i+1)+". "+r.ID+" ("+string(r.Kind)+", priority "+strconv.Itoa(r.Priority)+
			" ranked at "+strconv.FormatFloat(q.EffectivePriority, 'f', 1, 64)+", "+shape(r)+", waiting "+
			now.Sub(r.EnqueuedAt).Round(time.Second).String()+"): "+q.Why)
	}
	if n := len(st.Waiting) - poolShownWaiting; n > 0 {
		lines = append(lines, "and "+strconv.Itoa(n)+" more (starter pool lists them all)")
	}
	return strings.Join(lines, "  \n")
}

// shape is what a request asks for: "2 nodes × 1 GPU".
func shape(r admission.Request) string {
	gpus := strconv.Itoa(max(1, r.Resources.GPUs)) + " GPU"
	if r.Resources.GPUs > 1 {
		gpus += "s"
	}
	if n := r.Resources.NodeCount(); n > 1 {
		return strconv.Itoa(n) + " nodes × " + gpus
	}
	return gpus
}

// explainWaits says in st why each request of its queue waits.
func explainWaits(s *admission.State, st Status) {
	for i := range st.Waiting {
		st.Waiting[i].Why = waitsFor(s, st, i)
	}
}

// waitsFor says why the i-th request of the queue waits.
func waitsFor(s *admission.State, st Status, i int) string {
	r := st.Waiting[i].Request
	switch {
	case r.Paused:
		return "paused; it keeps its place"
	case !s.Placeable(r):
		return "fits no base machine and no burst pool its tier (" + string(r.Tier) + ") may use, even with the pool empty: change its resources or the pools file"
	case i > 0:
		return "behind " + st.Waiting[0].ID + ", admitted first (higher priority with aging, or earlier)"
	default:
		return "next to be admitted: waits for " + shape(r) + " to come free on base (" + strconv.Itoa(st.FreeBaseGPUs) +
			" GPUs free) or in a burst pool its tier may use, or for lower-priority training to yield"
	}
}

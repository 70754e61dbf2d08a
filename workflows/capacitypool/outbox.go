package capacitypool

import (
	"go.temporal.io/sdk/workflow"

	"refuel/pkg/admission"
	"refuel/workflows"
)

// PoolMessage is a grant, or a yield, the pool decided for a request and
// has not sent yet. Seq names the request's life in the pool: one given
// back and made again is a new request, and a message for the old one is
// dropped.
type PoolMessage struct {
	ID  string `json:"id"`
	Seq int64  `json:"seq"`
	// Yield is the request to give the capacity back; nil for a grant.
	Yield *workflows.YieldRequest `json:"yield,omitempty"`
}

// sendWindow is how many grants and yields the pool has on their way at
// once. The server delivers the signals a workflow sends at its own pace
// (40 to 170 a second on the embedded server's SQLite on two cores), and
// a generation must see every one delivered before it ends, taking in
// signals all the while; with the rest waiting in the pool that takes a
// second or two, not the minutes a burst of thousands would, while a
// cluster that delivers in tens of milliseconds still delivers over a
// thousand a second.
const sendWindow = 64

// grant tells an allocation's owner it may acquire.
func (p *capacityPool) grant(ctx workflow.Context, a admission.Allocation) {
	p.post(ctx, a, nil)
}

// Yield asks an allocation's holder to checkpoint and give it back.
func (p *capacityPool) Yield(ctx workflow.Context, a admission.Allocation, reason, forID string) {
	_ = p.state.MarkYielding(a.Request.ID)
	p.post(ctx, a, &workflows.YieldRequest{ID: a.Request.ID, Reason: reason, For: forID})
}

// post sends a grant or yield, in the order decided. At scale it joins
// the outbox; before, the pool sent it and waited for its delivery.
func (p *capacityPool) post(ctx workflow.Context, a admission.Allocation, y *workflows.YieldRequest) {
	m := PoolMessage{ID: a.Request.ID, Seq: a.Request.Seq, Yield: y}
	if !p.atScale {
		if err := p.signal(ctx, a, m).Get(ctx, nil); err != nil {
			p.undelivered(ctx, a, m, err)
		}
		return
	}
	p.outbox = append(p.outbox, m)
	p.flush(ctx)
}

// flush sends from the outbox while the window has room. A message whose
// request is no longer held (released, or requeued and admitted anew) is
// dropped; a grant goes with the allocation as it is now.
func (p *capacityPool) flush(ctx workflow.Context) {
	for !p.closing && p.delivering < sendWindow && len(p.outbox) > 0 {
		m := p.outbox[0]
		p.outbox = p.outbox[1:]
		a, ok := p.state.Held(m.ID, m.Seq)
		if !ok {
			continue
		}
		f := p.signal(ctx, a, m)
		p.delivering++
		workflow.Go(ctx, func(ctx workflow.Context) {
			err := f.Get(ctx, nil)
			p.delivering--
			if err != nil {
				p.undelivered(ctx, a, m, err)
				p.returned.Send(ctx, true)
			}
			p.flush(ctx)
		})
	}
}

func (p *capacityPool) signal(ctx workflow.Context, a admission.Allocation, m PoolMessage) workflow.Future {
	if m.Yield != nil {
		return workflow.SignalExternalWorkflow(ctx, a.Request.Owner, "", workflows.SignalYield, *m.Yield)
	}
	if a.Layer == admission.BurstLayer && len(a.Nodes) > 0 && p.state.Rules >= admission.GangRules {
		// The gang tells why it waits, and until when (see Unready).
		a.GiveBackAt = a.AdmittedAt.Add(p.state.Config.GangTimeoutOrDefault())
	}
	if a.Layer == admission.BaseLayer {
		// The holder books base capacity to the group the pools file
		// names; the pool's own state leaves Pool to burst.
		a.Pool = p.state.Config.Base.Name
	}
	return workflow.SignalExternalWorkflow(ctx, a.Request.Owner, "", workflows.SignalCapacityGranted, a)
}

// undelivered gives back the capacity of an owner a grant or yield did
// not reach (it is gone).
func (p *capacityPool) undelivered(ctx workflow.Context, a admission.Allocation, m PoolMessage, err error) {
	what := "grant not delivered; releasing"
	if m.Yield != nil {
		what = "yield not delivered; releasing"
	}
	workflow.GetLogger(ctx).Warn(what, "id", a.Request.ID, "owner", a.Request.Owner, "error", err)
	p.releaseIf(a.Request.ID, a.Request.Seq)
}

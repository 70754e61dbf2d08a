package policy

import (
	"math"
	"time"
)

// An outlook is the expected cost to finish a deadline run from every
// state it can be in, when a zone's stock follows a stockModel: refuel's
// policy is to take the action whose expected cost is lowest. States are
// counted in plan steps: remaining work r, slack s (time left less work
// left), what is held with how many steps of restart overhead it still
// owes, whether spot is in stock and the age bucket of that stretch. It is
// solved by backward induction: every step either does a step of work or
// spends a step of slack, so each state depends only on states with less
// of one and the same of the other.
type outlook struct {
	key outlookKey
	// after[r][s][held][in][bucket] is the expected cost from (r, s)
	// holding held, once a step has passed in which the stock was in, in
	// age bucket bucket: the stretch went on (maybe into the next bucket)
	// or ended, losing spot if it was held. It is what the step's action
	// leads to, before the next action is chosen.
	after []float32
}

// outlookKey is everything an outlook depends on.
type outlookKey struct {
	model            stockModel
	step             time.Duration
	overhead         int     // restart overhead in steps
	works, slacks    int     // table bounds: r in [0, works], s in [0, slacks]
	spotCost, odCost float32 // per step, on-demand's being 1 when prices are unknown
}

// Held states: 0 holds nothing; 1+k holds spot owing k steps of overhead;
// overhead+2+k holds on-demand owing k.
func (k outlookKey) heldStates() int       { return 2*k.overhead + 3 }
func (k outlookKey) spotHeld(owed int) int { return 1 + owed }
func (k outlookKey) odHeld(owed int) int   { return k.overhead + 2 + owed }

const stockStates = 2 * ageBuckets

var inf32 = float32(math.Inf(1))

func solveOutlook(k outlookKey) *outlook {
	var pEnd [2][ageBuckets]float32
	var pAge [ageBuckets]float32
	for in := range 2 {
		for b := range ageBuckets {
			pEnd[in][b] = float32(min(0.999, k.model.endChance(in, b, k.step)))
		}
	}
	for b := range ageBuckets {
		pAge[b] = float32(ageChance(b, k.step))
	}
	H := k.heldStates()
	layer := H * stockStates
	o := &outlook{key: k, after: make([]float32, (k.works+1)*(k.slacks+1)*layer)}
	value := make([]float32, layer) // best cost at the cell being solved, per held and stock state
	stuck := make([]float32, layer) // after a step with no slack left: cannot finish
	for i := range stuck {
		stuck[i] = inf32
	}
	for r := 1; r <= k.works; r++ {
		for s := 0; s <= k.slacks; s++ {
			idle := stuck // a step without work spends a step of slack
			if s > 0 {
				idle = o.after[o.at(r, s-1):][:layer]
			}
			work := o.after[o.at(r-1, s):][:layer] // a step of work
			for h := range H {
				// Where holding nothing, on-demand or spot leads from h.
				odNext, odOwed := work[k.odHeld(0)*stockStates:], k.overhead
				if h >= k.odHeld(0) {
					odOwed = h - k.odHeld(0)
				}
				if odOwed > 0 {
					odNext = idle[k.odHeld(odOwed-1)*stockStates:]
				}
				spotNext, spotOwed := work[k.spotHeld(0)*stockStates:], k.overhead
				if h >= k.spotHeld(0) && h <= k.spotHeld(k.overhead) {
					spotOwed = h - k.spotHeld(0)
				}
				if spotOwed > 0 {
					spotNext = idle[k.spotHeld(spotOwed-1)*stockStates:]
				}
				v := value[h*stockStates:][:stockStates]
				for st := range v {
					v[st] = min(idle[st], k.odCost+odNext[st])
				}
				for st := ageBuckets; st < stockStates; st++ {
					v[st] = min(v[st], k.spotCost+spotNext[st])
				}
			}
			after := o.after[o.at(r, s):][:layer]
			for h := range H {
				lost := h // what is held once the stock runs out
				if h >= k.spotHeld(0) && h <= k.spotHeld(k.overhead) {
					lost = 0
				}
				for in := range 2 {
					for b := range ageBuckets {
						pe, pa := pEnd[in][b], pAge[b]
						cur := value[h*stockStates+in*ageBuckets+b]
						older := cur
						if b+1 < ageBuckets {
							older = value[h*stockStates+in*ageBuckets+b+1]
						}
						keep := h
						if in == 1 {
							keep = lost
						}
						var c float32
						if pa < 1 {
							c = (1 - pe) * (1 - pa) * cur
						}
						if pa > 0 {
							c += (1 - pe) * pa * older
						}
						after[h*stockStates+in*ageBuckets+b] = c + pe*value[keep*stockStates+(1-in)*ageBuckets]
					}
				}
			}
		}
	}
	return o
}

func (o *outlook) at(r, s int) int {
	return (r*(o.key.slacks+1) + s) * o.key.heldStates() * stockStates
}

// Actions a run may take for one step.
const (
	actNone = iota
	actSpot
	actOnDemand
)

// q is the expected cost of taking act for one step from (r, s) holding h
// with the stock in, in age bucket b, and acting best after; solveOutlook
// computes the same for every state at once.
func (o *outlook) q(r, s, h, in, b, act int) float32 {
	k := o.key
	if act == actNone {
		return o.afterStep(r, s-1, 0, in, b)
	}
	held, price := k.odHeld, k.odCost
	if act == actSpot {
		held, price = k.spotHeld, k.spotCost
	}
	owed := k.overhead // a new start
	if h >= held(0) && h <= held(k.overhead) {
		owed = h - held(0)
	}
	if owed > 0 {
		return price + o.afterStep(r, s-1, held(owed-1), in, b)
	}
	return price + o.afterStep(r-1, s, held(0), in, b)
}

// afterStep reads after, outside the table too: done costs nothing, and
// a run out of slack cannot finish.
func (o *outlook) afterStep(r, s, h, in, b int) float32 {
	switch {
	case r <= 0:
		return 0
	case s < 0:
		return inf32
	}
	r, s = min(r, o.key.works), min(s, o.key.slacks)
	return o.after[o.at(r, s)+h*stockStates+in*ageBuckets+b]
}

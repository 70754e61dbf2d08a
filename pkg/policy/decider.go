package policy

// Decider decides exactly as Decide does, and remembers the outlooks it
// solved so that a caller deciding again and again for one run (the
// replay simulator; a workflow's worker) does not solve the same one
// twice. What it remembers never changes a decision, only its cost. A
// Decider is not safe for concurrent use; its zero value is ready.
type Decider struct {
	outlooks []*outlook // most recently used first
	used     int        // outlooks the decision under way used so far
	// plans, when set, hold the outlooks instead (Plans.Decider).
	plans *Plans
}

// rememberedOutlooks is the most outlooks a Decider keeps: enough for
// every zone of a multi-zone run. After each decision it keeps only those
// the decision used: an outlook is tens of megabytes for a long run with
// much slack, and one whose model was refitted is not met again, so a
// workflow's cached run holds one per zone at most.
const rememberedOutlooks = 16

// forget drops the outlooks the decision just made did not use.
func (d *Decider) forget() {
	n := min(len(d.outlooks), max(d.used, 1))
	clear(d.outlooks[n:])
	d.outlooks = d.outlooks[:n]
	d.used = 0
}

func (d *Decider) outlook(k outlookKey) *outlook {
	if d.plans != nil {
		// Only activities decide with plans; a workflow's Decider has
		// none, and its outlooks are its own.
		return d.plans.outlook(k) //workflowcheck:ignore
	}
	d.used++
	for i, o := range d.outlooks {
		if o.key == k {
			copy(d.outlooks[1:i+1], d.outlooks[:i])
			d.outlooks[0] = o
			return o
		}
	}
	o := solveOutlook(k)
	if len(d.outlooks) < rememberedOutlooks {
		d.outlooks = append(d.outlooks, nil)
	}
	copy(d.outlooks[1:], d.outlooks)
	d.outlooks[0] = o
	return o
}

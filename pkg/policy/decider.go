package policy

// Decider decides exactly as Decide does, and remembers the outlooks it
// solved so that a caller deciding again and again for one run (the
// replay simulator; a workflow's worker) does not solve the same one
// twice. What it remembers never changes a decision, only its cost. A
// Decider is not safe for concurrent use; its zero value is ready.
type Decider struct {
	outlooks []*outlook // most recently used first
}

// rememberedOutlooks is how many outlooks a Decider keeps: enough for
// every zone of a multi-zone run.
const rememberedOutlooks = 16

func (d *Decider) outlook(k outlookKey) *outlook {
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

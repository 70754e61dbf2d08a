package trace

// A gang is a run of several nodes that needs all of them at once, in one
// zone: it can have spot during a tick only if the tick's point holds
// every node. Points are counts of instances in stock, but most traces
// probe a single instance and only ever say 0 or 1; such a one-node trace
// stands for every node alike, so a gang finds stock in it wherever one
// instance does. Every reader of a trace for a gang (the replay, its
// optimum, the policies through the replay's view) asks here, so that
// they agree on what a point means.

// OneNode reports whether every point is 0 or 1: a trace that probed one
// instance, whose 1 stands for stock for every node alike.
func (t *Trace) OneNode() bool { return t.Peak() <= 1 }

// Peak is the largest point: the most instances the trace ever saw in
// stock at once. A gang of more nodes than a counting trace's peak never
// finds stock in it.
func (t *Trace) Peak() int {
	peak := 0
	for _, p := range t.Points {
		peak = max(peak, p)
	}
	return peak
}

// GangInStock reports whether a tick whose point is point holds a gang of
// nodes instances (below 1 counts as 1) at once: in a one-node trace, as
// soon as anything is in stock; in a trace of counts, once nodes are.
func GangInStock(point, nodes int, oneNode bool) bool {
	if oneNode {
		return point > 0
	}
	return point >= max(1, nodes)
}

// Gang is, tick by tick, whether a gang of nodes instances can have spot.
// Gang(1) is Available at every tick.
func (t *Trace) Gang(nodes int) []bool {
	one := t.OneNode()
	out := make([]bool, len(t.Points))
	for i, p := range t.Points {
		out[i] = GangInStock(p, nodes, one)
	}
	return out
}

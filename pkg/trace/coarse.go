package trace

import "time"

// Coarsen is the trace read at ticks of the smallest multiple of its gap
// that is at least gap: each coarse tick's point is the fewest instances
// any of its points had, so a tick is in stock only where stock lasted
// through all of it. A trailing part of a coarse tick is dropped. A trace
// already as coarse is returned as it is.
func (t *Trace) Coarsen(gap time.Duration) *Trace {
	if t.Gap <= 0 || t.Gap >= gap {
		return t
	}
	k := int((gap + t.Gap - 1) / t.Gap)
	c := *t
	c.Gap = time.Duration(k) * t.Gap
	c.Points = make([]int, len(t.Points)/k)
	for i := range c.Points {
		least := t.Points[i*k]
		for _, p := range t.Points[i*k : (i+1)*k] {
			least = min(least, p)
		}
		c.Points[i] = least
	}
	return &c
}

package autoscale

import (
	"math"
	"time"

	"refuel/pkg/spec"
)

// Staffing for the latency SLO. A replica takes max_concurrency requests
// at once; the rest wait at the balancer. How often a request waits past
// slo.latency depends on the scale as well as on the busy share: a few
// slots leave requests waiting far more often than many at the same
// share (the square-root law of queueing). A forecast and its margin
// size the fleet to the work, and at a small scale that keeps requests
// late: one replica with half its slots busy misses the SLO for a few
// requests in a hundred.
//
// Staffing puts a floor under the replicas wanted: the fewest at which,
// by the Erlang C model (the slots as servers, Poisson arrivals, each
// request holding its slot for the mean time measured), a request waits
// longer than slo.latency no more often than a tolerance. Sizing every
// minute to the SLO's own share would be far too strict: a fleet rounds
// up to whole replicas, and most minutes then miss far less than the
// share. So the tolerance is set by feedback on the requests the
// balancers actually answered late: it tightens while the share missed
// lately is above its aim and eases while it is below. Once the floor is
// off and requests are still in time, the same feedback eases the
// candidates' allowance for falling short of the load (Slack), and it
// tightens that first when requests come late again.
type Staffing struct {
	// Requests and Missed are the requests finished and those answered
	// late or failed, as the reports counted them, each fading with a
	// half-life of SLOHalfLife.
	Requests float64 `json:"requests"`
	Missed   float64 `json:"missed"`
	// At is the latest report counted.
	At time.Time `json:"at,omitzero"`
	// Tolerance is the share of requests the floor lets wait past
	// slo.latency, between minTolerance and maxTolerance; 0 means
	// maxTolerance, where a service starts.
	Tolerance float64 `json:"tolerance,omitempty"`
	// Slack multiplies the share of intervals a candidate may fall short
	// of the load (Allowance), from 1 to maxSlack, once the floor is off
	// and requests are still answered within the SLO; 0 means 1.
	Slack float64 `json:"slack,omitempty"`
}

// Allowance is the share of intervals in which the replicas a candidate
// would have had may fall short of the load before it is priced above
// those that did not (Candidate.cheaper): the SLO's share, times Slack.
func (s Staffing) Allowance() float64 { return (1 - SLO) * max(1, s.Slack) }

const (
	// SLOHalfLife is how fast requests counted fade: an hour holds
	// enough requests for a share of 1% to be a count of many at a
	// modest rate, and is short enough to follow the day.
	SLOHalfLife = time.Hour
	// toleranceTime is how long the tolerance takes to move by a factor
	// of e while the share missed is twice its aim or more (or none is
	// missed): from no floor to a strict one (1%) within about an hour
	// of misses.
	toleranceTime = 15 * time.Minute
	// maxTolerance is where a service starts, and means no floor: a
	// service whose requests are answered in time keeps what its
	// forecast asks for.
	maxTolerance = 1
	// minTolerance bounds how strict the floor gets.
	minTolerance = 1e-4
	// maxSlack bounds how far the candidates' allowance eases: to twice
	// the SLO's share of intervals. The share of intervals short of the
	// load is a stand-in for the requests late, and a strict one (a
	// request is late only when it waits past slo.latency, not whenever
	// the load tops the replicas); where the requests show room, the
	// stand-in may give some, but no more than the SLO again.
	maxSlack = 2
	// minCounted is how many requests the share needs before it steers:
	// with fewer, a share of 1% is a count of none or one.
	minCounted = 1 / (1 - SLO)
	// maxStaffedSlots bounds the slots the Erlang C search counts:
	// beyond it the wait at the work's own scale is negligible and the
	// work alone sizes the fleet.
	maxStaffedSlots = 100_000
)

// aim is the share of requests missed the feedback steers to: what the
// SLO allows.
const aim = 1 - SLO

// Observe counts one report's finished and missed requests and steers
// the tolerance by the share missed lately.
func (s *Staffing) Observe(m Metrics) {
	if s.Tolerance == 0 {
		s.Tolerance = maxTolerance
	}
	// A report no newer than the latest counted (another balancer's,
	// sent at about the same time) adds its requests; only time fades
	// and steers.
	if dt := m.At.Sub(s.At); !s.At.IsZero() && dt > 0 {
		fade := math.Exp2(-dt.Seconds() / SLOHalfLife.Seconds())
		s.Requests *= fade
		s.Missed *= fade
		if s.Requests >= minCounted {
			// Steer in log space: the error is how far the share is
			// from its aim, in units of the aim, at most one either way.
			// One quantity steered both ways: below the SLO it is the
			// floor's tolerance, above it the candidates' slack.
			err := max(-1, min(1, (aim-s.Share())/aim))
			step := math.Exp(err * dt.Seconds() / toleranceTime.Seconds())
			s.Slack = max(1, s.Slack)
			if err > 0 && s.Tolerance >= maxTolerance || err < 0 && s.Slack > 1 {
				s.Slack = max(1, min(maxSlack, s.Slack*step))
			} else {
				s.Tolerance = max(minTolerance, min(maxTolerance, s.Tolerance*step))
			}
		}
	}
	if m.At.After(s.At) {
		s.At = m.At
	}
	s.Requests += max(0, m.Requests)
	s.Missed += max(0, min(m.Missed, m.Requests))
}

// Share is the share of requests missed lately; 0 before any finished.
func (s Staffing) Share() float64 {
	if s.Requests <= 0 {
		return 0
	}
	return s.Missed / s.Requests
}

// Floor is the replicas at which the requests the forecast load brings
// wait longer than slo.latency no more often than the tolerance; 0 where
// the service serves no requests, the reports have not shown how long a
// request holds its slot, or the floor is off. The slots kept busy now
// are scaled by the forecast load over the newest (current): a load is in
// the units of the spec's target, and only its growth carries over to
// the requests.
func (s Staffing) Floor(load, current float64, reports []Metrics, sp spec.ServiceSpec) float64 {
	if !sp.Serves() || sp.MaxConcurrency < 1 || sp.SLO == nil || sp.SLO.Latency <= 0 || load <= 0 {
		return 0
	}
	tol := s.Tolerance
	if tol == 0 || tol >= maxTolerance {
		return 0 // the requests were answered in time without a floor
	}
	hold, offered, ok := slotHold(reports)
	if !ok {
		return 0
	}
	if current > 0 {
		offered *= max(1, load/current)
	}
	m := float64(sp.MaxConcurrency)
	return float64(erlangSlots(offered, hold, sp.SLO.Latency.D().Seconds(), tol)) / m
}

// slotHold is how long a request holds its replica slot on average over
// the reports (Little's law: the slot-seconds served per request taken
// up), and the slots the requests arriving over the last Smoothing keep
// busy: those serving, and the growth of the queue times the hold (a
// fleet that falls behind serves less than arrives). ok is false before
// any request was served.
func slotHold(reports []Metrics) (hold, busy float64, ok bool) {
	if len(reports) == 0 {
		return 0, 0, false
	}
	var slotSeconds, taken, span, serving, queued float64
	recent := reports[len(reports)-1].At.Add(-Smoothing)
	for i := 1; i < len(reports); i++ {
		r, prev := reports[i], reports[i-1]
		dt := r.At.Sub(prev.At).Seconds()
		slotSeconds += r.Serving * dt
		taken += r.QPS*dt - (r.QueueLength - prev.QueueLength)
		if !prev.At.Before(recent) {
			span += dt
			serving += r.Serving * dt
			queued += r.QueueLength - prev.QueueLength
		}
	}
	if slotSeconds <= 0 || taken <= 0 || span <= 0 {
		return 0, 0, false
	}
	hold = slotSeconds / taken
	return hold, max(0, serving+queued*hold) / span, true
}

// erlangSlots is the fewest servers at which, with offered Erlangs of
// Poisson arrivals each holding a server for hold seconds on average
// (exponentially), an arrival waits longer than wait with probability at
// most miss (Erlang C: the chance to wait at all, times the exponential
// tail of the wait).
func erlangSlots(offered, hold, wait, miss float64) int {
	if offered <= 0 {
		return 0
	}
	if offered >= maxStaffedSlots {
		return int(math.Ceil(offered))
	}
	b := 1.0 // Erlang B with c servers, by its stable recursion
	for c := 1; ; c++ {
		n := float64(c)
		b = offered * b / (n + offered*b)
		if n <= offered {
			continue
		}
		waits := n * b / (n - offered*(1-b))
		if waits*math.Exp(-(n-offered)*wait/hold) <= miss || c >= maxStaffedSlots {
			return c
		}
	}
}

package replay

import (
	"fmt"
	"slices"
	"time"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
)

// Meter keeps one run's account tick by tick under the simulation model:
// what the policy saw of the market, what the run held, its progress,
// overheads, preemptions and cost. Run replays traces through it, and a
// TrainingRun on the simulated cloud's clock keeps one too, so both reach
// the same decisions and the same bill from the same stock. A Meter is fed
// each tick's stock, one entry per zone in the order of its zones: for a
// job of several nodes, whether the whole gang is in stock (see
// Market.Available); or, with WitnessCounts and BeginCounts, how many of
// its nodes are (see Market.CountsAt), which an elastic gang trains on
// (see Job.MinNodes). The
// policy sees the market in one node's prices (see Job.nodeMoveUSD), and
// an elastic gang's counts in Gang; the bill counts every node held.
type Meter struct {
	job   Job
	gap   time.Duration
	zones []string

	history []policy.Availability
	// watched is history over only the ticks the run saw each zone.
	watched []policy.Availability
	view    policy.Market
	// inRegion lists the zones of each of view.Regions, when there are
	// several.
	inRegion [][]int
	scratch  []policy.Zone

	t           int   // ticks of the run so far
	counts      []int // of the gang's nodes in stock, per zone
	lostAtStart bool  // the open tick began with a preemption
	cur         policy.Choice
	curZone     int
	// nodeWork is the work done in node-time: a tick's work on w nodes
	// adds w times its time, so a shrunk gang's work stays exact; the
	// gang's work done is nodeWork over its nodes.
	nodeWork     int64
	overheadLeft time.Duration
	// partial is, per zone, what has been seen of stock for a shrunk
	// elastic gang, and gang its view of the open tick (see policy.Gang).
	partial []policy.Availability
	gang    policy.Gang
	// checkpoint is the region the run's checkpoint is in: that of the
	// last instance it held.
	checkpoint string
	// checkpointCloud is the cloud that region is in.
	checkpointCloud string
	held            float64 // USD spent on instances
	res             Result
	// belief is, per zone, how many of the gang's nodes were last seen in
	// stock there, and seen whether the open tick showed it (the zone is
	// held, or was tried or probed): a run that learns by trying knows a
	// zone's stock no better (see Job.LearnsByTrying and Try).
	belief []int
	seen   []bool
}

// NewMeter returns the meter of a run of job on a market of the named
// zones whose ticks last gap.
func NewMeter(job Job, zones []string, gap time.Duration) (*Meter, error) {
	if err := job.Validate(); err != nil {
		return nil, err
	}
	if err := job.fits(len(zones)); err != nil {
		return nil, err
	}
	if len(zones) == 0 || gap <= 0 {
		return nil, &MarketError{Problem: fmt.Sprintf("a market of %d zones with ticks of %s", len(zones), gap), Fix: "give at least one zone and a positive tick"}
	}
	m := &Meter{
		job: job, gap: gap, zones: append([]string(nil), zones...), curZone: -1,
		history: make([]policy.Availability, len(zones)), watched: make([]policy.Availability, len(zones)),
		belief: make([]int, len(zones)), seen: make([]bool, len(zones)),
		view: policy.Market{Step: gap, OnDemandPrice: job.cheapestOnDemand(), Zones: make([]policy.Zone, len(zones)),
			Move: policy.Move{USD: job.nodeMoveUSD(), Time: job.moveTime(gap)}, Rules: job.Rules},
	}
	for z := range zones {
		r := slices.IndexFunc(m.view.Regions, func(rs policy.RegionStock) bool { return rs.Region == job.region(z) })
		if r < 0 {
			r = len(m.view.Regions)
			m.view.Regions = append(m.view.Regions, policy.RegionStock{Region: job.region(z)})
			m.inRegion = append(m.inRegion, nil)
		}
		m.inRegion[r] = append(m.inRegion[r], z)
	}
	if len(m.view.Regions) == 1 {
		m.view.Regions, m.inRegion = nil, nil
	}
	if job.elastic() {
		m.partial = make([]policy.Availability, len(zones))
		m.gang = policy.Gang{Nodes: job.nodes(), MinNodes: job.minNodes(), InStock: make([]int, len(zones)), Partial: m.partial}
	}
	return m, nil
}

// countsOf reads a tick's stock as whole gangs in stock or none.
func (m *Meter) countsOf(stock []bool) []int {
	counts := make([]int, len(stock))
	for z, in := range stock {
		if in {
			counts[z] = m.job.nodes()
		}
	}
	return counts
}

// Witness records a tick of the market before the run starts: the run
// knows the market's past as a scheduler watching the pools saw it.
func (m *Meter) Witness(stock []bool) error { return m.WitnessCounts(m.countsOf(stock)) }

// WitnessCounts is Witness with the nodes of the gang in stock per zone.
func (m *Meter) WitnessCounts(counts []int) error {
	if err := m.see(counts); err != nil {
		return err
	}
	for z := range m.seen {
		m.seen[z] = true // the market's past is the deployment's memory
	}
	m.observe()
	return nil
}

// Begin opens the run's next tick with its stock. Spot held into a tick
// out of stock is lost at its start; Begin reports that, and returns what
// the policy decides the tick on.
func (m *Meter) Begin(stock []bool) (s policy.State, market policy.Market, preempted bool, err error) {
	return m.BeginCounts(m.countsOf(stock))
}

// BeginCounts is Begin with the nodes of the gang in stock per zone: spot
// held on more nodes than are in stock is lost at the tick's start, a
// shrunk gang's as a whole gang's.
func (m *Meter) BeginCounts(counts []int) (s policy.State, market policy.Market, preempted bool, err error) {
	if err := m.see(counts); err != nil {
		return policy.State{}, policy.Market{}, false, err
	}
	if m.cur.Market == capacity.Spot && m.counts[m.curZone] < m.width(m.cur) {
		m.res.Preemptions++
		preempted = true
		m.lostAtStart = true
		m.cur, m.curZone, m.overheadLeft = policy.None, -1, 0
	}
	m.view.Move.Region = ""
	if m.nodeWork > 0 {
		m.view.Move.Region = m.checkpoint
	}
	elapsed := m.Elapsed()
	done := m.done()
	s = policy.State{
		Elapsed: elapsed, TimeLeft: m.job.Deadline - elapsed,
		Done: done, Remaining: m.job.Work - done,
		RestartOverhead: m.job.RestartOverhead, OverheadLeft: m.overheadLeft,
		Current: m.cur,
	}
	return s, m.view, preempted, nil
}

// Gang is the open tick's stock as an elastic gang decides on it; the
// zero Gang for a rigid one.
func (m *Meter) Gang() policy.Gang { return m.gang }

// width is the nodes c holds.
func (m *Meter) width(c policy.Choice) int {
	if c.Nodes > 0 {
		return c.Nodes
	}
	return m.job.nodes()
}

// done is the gang's work done.
func (m *Meter) done() time.Duration { return time.Duration(m.nodeWork / int64(m.job.nodes())) }

// Hold spends the opened tick holding c, and returns the tick as the
// account shows it (its choice with the zone resolved). A choice the model
// does not allow is a *ChoiceError and leaves the tick open.
func (m *Meter) Hold(c policy.Choice) (Step, error) {
	zone, err := m.resolve(c)
	if err != nil {
		return Step{}, &ChoiceError{Tick: m.t, Choice: c, Reason: err.Error()}
	}
	if zone >= 0 {
		c.Zone = m.zones[zone]
	}
	if c.Nodes >= m.job.nodes() {
		c.Nodes = 0
	}
	m.observe()
	step := Step{Choice: c, Preempted: m.lostAtStart}
	m.lostAtStart = false
	elapsed := m.Elapsed()
	m.t++
	if !c.Holds() {
		m.cur, m.curZone, m.overheadLeft = policy.None, -1, 0
		step.Done, step.Cost = m.done(), m.cost()
		m.res.Steps = append(m.res.Steps, step)
		m.res.Finish = elapsed + m.gap
		return step, nil
	}
	if c != m.cur {
		if m.cur.Holds() {
			m.res.Changeovers++
		}
		m.res.Starts++
		m.overheadLeft = m.job.RestartOverhead
		if r := m.job.region(zone); m.nodeWork > 0 && r != m.checkpoint {
			m.res.Transfers++
			m.res.EgressUSD += m.job.moveUSD()
			m.overheadLeft += m.job.moveTime(m.gap)
			if c := m.job.cloud(zone); c != m.checkpointCloud {
				m.res.CloudMoves++
			}
		}
		m.checkpoint, m.checkpointCloud = m.job.region(zone), m.job.cloud(zone)
	}
	m.cur, m.curZone = c, zone
	held := m.gap
	w := int64(m.width(c))
	if m.overheadLeft >= m.gap {
		m.overheadLeft -= m.gap
	} else {
		work := int64(m.gap-m.overheadLeft) * w
		if left := int64(m.job.Work)*int64(m.job.nodes()) - m.nodeWork; work >= left {
			held = m.overheadLeft + time.Duration((left+w-1)/w)
			m.nodeWork += left
			m.res.Finished = true
		} else {
			m.nodeWork += work
		}
		m.overheadLeft = 0
	}
	nodes := float64(w)
	if c.Market == capacity.Spot {
		m.res.Spot += held
		if c.Nodes > 0 {
			m.res.Shrunk += held
		}
		m.held += held.Hours() * m.job.spotPrice(zone) * nodes
	} else {
		m.res.OnDemand += held
		m.held += held.Hours() * m.job.onDemandPrice(zone) * nodes
	}
	step.Done, step.Cost = m.done(), m.cost()
	m.res.Steps = append(m.res.Steps, step)
	m.res.Finish = elapsed + m.gap
	if m.res.Finished {
		m.res.Finish = elapsed + held
	}
	return step, nil
}

// Finished reports whether the work is done.
func (m *Meter) Finished() bool { return m.res.Finished }

// Elapsed is the market time since the run started.
func (m *Meter) Elapsed() time.Duration { return time.Duration(m.t) * m.gap }

// Gap is the market time of a tick.
func (m *Meter) Gap() time.Duration { return m.gap }

// Holding is what the run holds now.
func (m *Meter) Holding() policy.Choice { return m.cur }

// Result is the account so far.
func (m *Meter) Result() Result {
	res := m.res
	res.Steps = append([]Step(nil), m.res.Steps...)
	res.Cost = m.cost()
	res.DeadlineMet = res.Finished && res.Finish <= m.job.Deadline
	return res
}

func (m *Meter) cost() float64 { return m.held + m.res.EgressUSD + m.res.ProbeUSD }

// Probe tries spot in zone z during the open tick to learn its stock, as
// an acquisition there would: refused, it costs nothing; taken, the
// instance is let go after billed, at the zone's spot price on every node.
// It reports whether stock was there.
func (m *Meter) Probe(z int, billed time.Duration) bool {
	if z < 0 || z >= len(m.zones) {
		return false
	}
	return m.Probed(z, m.counts[z], billed)
}

// Probed is Probe answered by an acquisition made outside the meter (a
// live run's, through its provider): it had n of the nodes, which is
// what the run knows of zone z's stock for the rest of the tick. Where
// the market's own stock says the same, it is Probe.
func (m *Meter) Probed(z, n int, billed time.Duration) bool {
	if z < 0 || z >= len(m.zones) {
		return false
	}
	m.counts[z] = max(0, min(n, m.job.nodes()))
	m.seen[z] = true
	m.show(z)
	if !m.inStock(z) {
		return false
	}
	m.res.ProbeUSD += billed.Hours() * m.job.spotPrice(z) * float64(m.job.nodes())
	m.res.Probes++
	return true
}

func (m *Meter) see(counts []int) error {
	if len(counts) != len(m.zones) {
		return &MarketError{Problem: fmt.Sprintf("a tick's stock has %d zones, the market %d", len(counts), len(m.zones)), Fix: "give one stock entry per zone"}
	}
	m.counts = m.counts[:0]
	for _, n := range counts {
		m.counts = append(m.counts, max(0, min(n, m.job.nodes())))
	}
	if m.gang.InStock != nil {
		copy(m.gang.InStock, m.counts)
	}
	for z := range m.seen {
		m.seen[z] = !m.job.LearnsByTrying || m.cur.Market == capacity.Spot && z == m.curZone
	}
	for z := range m.view.Zones {
		m.view.Zones[z] = policy.Zone{Name: m.zones[z], SpotPrice: m.job.spotPrice(z),
			OnDemandPrice: m.job.onDemandPrice(z), Region: m.job.region(z), History: m.history[z], Watched: m.watched[z]}
		m.show(z)
	}
	return nil
}

// show sets what the policy sees of zone z's stock in the open tick: what
// is there where it was seen, and otherwise that a try may be taken, as
// the product decides before it tries.
func (m *Meter) show(z int) {
	n := m.job.nodes()
	if m.seen[z] {
		n = m.counts[z]
	}
	m.view.Zones[z].SpotAvailable = n >= m.job.nodes()
	if m.gang.InStock != nil {
		m.gang.InStock[z] = n
	}
}

// Try tries the open tick's choice c as the product acquires it, for a run
// that learns by trying (Job.LearnsByTrying), and reports whether the run
// must decide the tick again on what that showed:
//   - spot in a zone is refused where fewer of the nodes it asks for are in
//     stock, at no cost;
//   - a run that would let go of the instance it holds to hold nothing
//     first tries spot in a zone it has not tried this tick and is shown
//     in stock, as a probe (see Probe): it waits only where spot is not.
//
// Either shows the zone's stock for the rest of the tick. A choice taken,
// and every choice of a run that sees every zone, is for Hold.
func (m *Meter) Try(c policy.Choice) bool {
	if !m.job.LearnsByTrying {
		return false
	}
	if !c.Holds() && m.cur.Holds() {
		for z := range m.zones {
			if !m.seen[z] && m.view.Zones[z].SpotAvailable {
				m.Probe(z, ProbeBilled)
				return true
			}
		}
		return false
	}
	z := m.zoneIndex(c.Zone)
	if c.Market != capacity.Spot || z < 0 {
		return false
	}
	m.seen[z] = true
	m.show(z)
	return m.counts[z] < m.width(c)
}

func (m *Meter) observe() {
	for z := range m.belief {
		if m.seen[z] {
			m.belief[z] = m.counts[z]
		}
		m.view.Zones[z].SpotAvailable = m.believed(z)
	}
	m.view.Roaming.ObserveMoves(m.view.Zones, m.gap, m.view.Move.Time)
	for r, zones := range m.inRegion {
		m.scratch = m.scratch[:0]
		for _, z := range zones {
			m.scratch = append(m.scratch, m.view.Zones[z])
		}
		m.view.Regions[r].Roaming.Observe(m.scratch, m.gap)
	}
	for z := range m.history {
		m.history[z].Observe(m.believed(z), m.gap)
		if m.seen[z] {
			m.watched[z].Observe(m.believed(z), m.gap)
		}
	}
	for z := range m.partial {
		m.partial[z].Observe(m.belief[z] >= m.job.minNodes() && !m.believed(z), m.gap)
	}
}

// believed reports whether the whole gang was last seen in stock in zone z.
func (m *Meter) believed(z int) bool { return m.belief[z] >= m.job.nodes() }

// inStock reports whether the whole gang is in stock in zone z.
func (m *Meter) inStock(z int) bool { return m.counts[z] >= m.job.nodes() }

// resolve checks a choice against the model and returns its zone index:
// -1 for none; on-demand without a zone stays in the current zone, or
// takes the first. Spot on fewer nodes than the gang's holds at least its
// min nodes; on-demand holds every node.
func (m *Meter) resolve(c policy.Choice) (int, error) {
	switch n := c.Nodes; {
	case n <= 0 || n >= m.job.nodes():
	case c.Market != capacity.Spot:
		return 0, fmt.Errorf("holds %d nodes on %s, which always holds the whole gang", n, c.Market)
	case n < m.job.minNodes():
		return 0, fmt.Errorf("holds %d nodes, fewer than the gang's %d min nodes", n, m.job.minNodes())
	}
	switch c.Market {
	case "":
		return -1, nil
	case capacity.OnDemand:
		if c.Zone == "" {
			if m.curZone >= 0 {
				return m.curZone, nil
			}
			return 0, nil
		}
	case capacity.Spot:
	default:
		return 0, fmt.Errorf("is on market %q, which the replay does not have", c.Market)
	}
	z := m.zoneIndex(c.Zone)
	if z < 0 {
		return 0, fmt.Errorf("names zone %q, which is not one of the traces", c.Zone)
	}
	if c.Market == capacity.Spot && m.counts[z] < m.width(c) {
		return 0, fmt.Errorf("takes spot out of stock")
	}
	return z, nil
}

func (m *Meter) zoneIndex(name string) int {
	for i, z := range m.zones {
		if z == name {
			return i
		}
	}
	return -1
}

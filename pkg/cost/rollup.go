package cost

import (
	"cmp"
	"slices"
	"time"
)

// JobCost is one job's ledger for a rollup.
type JobCost struct {
	Job    string
	Team   string
	Ledger Ledger
	// At is when open segments are counted up to: the time of the reading
	// for a running job.
	At time.Time
}

// Row is what one team spent on one pool: in all, and of that what work
// lost to preemptions and recovering from them cost (each priced, like
// the ledger's, at the job's mean price).
type Row struct {
	Team        string  `json:"team"`
	Pool        string  `json:"pool"`
	Jobs        int     `json:"jobs"` // jobs with a segment in the pool
	Hours       float64 `json:"hours"`
	USD         float64 `json:"usd"`
	LostWorkUSD float64 `json:"lost_work_usd"`
	RecoveryUSD float64 `json:"recovery_usd"`
	IdleUSD     float64 `json:"idle_usd,omitempty"`
	// VolumeHours is the time the team's instances spent stopped in the
	// pool, paid for their volume alone (within USD, apart from Hours).
	VolumeHours float64 `json:"volume_hours,omitempty"`
}

// Rollup sums jobs' ledgers by team and pool, in rows sorted by team and
// then pool. Jobs are summed in (team, job) order, so the result does not
// depend on the order of items.
func Rollup(items []JobCost) []Row {
	jobs := slices.Clone(items)
	slices.SortStableFunc(jobs, func(a, b JobCost) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Job, b.Job))
	})
	type key struct{ team, pool string }
	index := map[key]int{}
	rows := []Row{}
	for _, j := range jobs {
		seen := map[string]bool{}
		perSecond := 0.0 // the job's mean price per second
		if h := j.Ledger.Hours(j.At); h > 0 {
			perSecond = j.Ledger.CostUSD(j.At) / h / 3600
		}
		for _, s := range j.Ledger.Segments {
			k := key{j.Team, s.Pool}
			i, ok := index[k]
			if !ok {
				i = len(rows)
				index[k] = i
				rows = append(rows, Row{Team: j.Team, Pool: s.Pool})
			}
			r := &rows[i]
			if !seen[s.Pool] {
				seen[s.Pool] = true
				r.Jobs++
			}
			if s.Stopped {
				r.VolumeHours += s.Hours(j.At)
			} else {
				r.Hours += s.Hours(j.At)
			}
			r.USD += s.USD(j.At)
			r.LostWorkUSD += s.LostWorkSeconds * perSecond
			r.RecoveryUSD += s.RecoverySeconds * perSecond
			r.IdleUSD += s.IdleUSD()
		}
	}
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Pool, b.Pool))
	})
	return rows
}

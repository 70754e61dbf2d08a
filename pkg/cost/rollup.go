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

// Row is what one team spent on one pool.
type Row struct {
	Team  string  `json:"team"`
	Pool  string  `json:"pool"`
	Jobs  int     `json:"jobs"` // jobs with a segment in the pool
	Hours float64 `json:"hours"`
	USD   float64 `json:"usd"`
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
			r.Hours += s.Hours(j.At)
			r.USD += s.USD(j.At)
		}
	}
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Pool, b.Pool))
	})
	return rows
}

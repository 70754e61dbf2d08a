package replay

import (
	"fmt"
	"time"

	"refuel/pkg/spec"
)

// Job is the run being replayed.
// Durations are in nanoseconds in JSON, so a job read back is exact.
type Job struct {
	Tier            spec.Tier     `json:"tier"`
	Work            time.Duration `json:"work"`     // compute time on one instance
	Deadline        time.Duration `json:"deadline"` // from the start
	RestartOverhead time.Duration `json:"restart_overhead"`
	SpotPrice       float64       `json:"spot_price"`     // USD per instance-hour
	OnDemandPrice   float64       `json:"ondemand_price"` // USD per instance-hour
}

// JobError names the field of a Job that is wrong and how to fix it.
type JobError struct {
	Field, Problem, Fix string
}

func (e *JobError) Error() string { return fmt.Sprintf("%s %s; %s", e.Field, e.Problem, e.Fix) }

// Validate checks that the job can be replayed at all.
func (j Job) Validate() error {
	switch {
	case j.Tier != spec.TierCritical && j.Tier != spec.TierDeadline && j.Tier != spec.TierFlexible:
		return &JobError{"tier", fmt.Sprintf("%q is not a tier", j.Tier), "use critical, deadline or flexible"}
	case j.Work <= 0:
		return &JobError{"work", "must be positive", "give the compute time, e.g. 48h"}
	case j.Deadline <= 0:
		return &JobError{"deadline", "must be positive", "give the time from start to deadline, e.g. 52h"}
	case j.RestartOverhead < 0:
		return &JobError{"restart overhead", "is negative", "give 0 or more, e.g. 12m"}
	case j.SpotPrice < 0 || j.OnDemandPrice < 0:
		return &JobError{"price", "is negative", "give USD per instance-hour, e.g. 0.9701 and 3.06"}
	}
	return nil
}

// OnDemandCost is what the job costs on on-demand from start to end: one
// restart overhead and the work. Costs are reported as a share of it.
func (j Job) OnDemandCost() float64 {
	return (j.Work + j.RestartOverhead).Hours() * j.OnDemandPrice
}

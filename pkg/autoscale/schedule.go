package autoscale

import (
	"time"

	"refuel/pkg/spec"
)

// ScheduledFloor is the highest replica floor of the windows open at any
// moment in [from, to]. Passing to = now + lead time scales up for a
// window before it opens, so its replicas are serving when it does.
// Windows whose cron does not parse (the spec validation rejects them)
// are skipped.
func ScheduledFloor(windows []spec.ScalingWindow, from, to time.Time) int {
	floor := 0
	for _, w := range windows {
		if w.MinReplicas <= floor {
			continue
		}
		sched, err := spec.ParseCron(w.Cron)
		if err != nil {
			continue
		}
		// A window is open at some moment in [from, to] when it opens in
		// (from - duration, to]. Next is strictly after its argument.
		if !sched.Next(from.Add(-w.Duration.D())).After(to) {
			floor = w.MinReplicas
		}
	}
	return floor
}

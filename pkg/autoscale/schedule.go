package autoscale

import (
	"fmt"
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

// floorSaid is why a decision holds a scheduled window's floor.
type floorSaid struct {
	reason string
	why    func(n int) string
}

// scheduledFloor is the floor of the windows open within lead of now,
// and how a decision that holds it says so: with the metrics stale
// (silent for longer than staleAfter), it names that too.
func scheduledFloor(windows []spec.ScalingWindow, now time.Time, lead time.Duration, stale bool, silent, staleAfter time.Duration) (int, floorSaid) {
	floor := ScheduledFloor(windows, now, now.Add(lead))
	if stale {
		return floor, floorSaid{"metrics stale; scheduled window", func(n int) string {
			return fmt.Sprintf("%s: no metrics for %s (stale after %s); a scheduled window asks for %d within %s",
				replicas(n), minutes(silent), minutes(staleAfter), floor, minutes(lead))
		}}
	}
	return floor, floorSaid{"scheduled window", func(n int) string {
		return fmt.Sprintf("%s: a scheduled window asks for %d within %s", replicas(n), floor, minutes(lead))
	}}
}

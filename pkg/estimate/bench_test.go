package estimate

import (
	"testing"
	"time"

	"refuel/pkg/spec"
)

// BenchmarkEstimate48hJob is `starter estimate` of a 48 h deadline run on
// two pools the memory has watched for weeks: the spec, the other tiers
// and three deadlines, 40 windows each. It should take seconds.
func BenchmarkEstimate48hJob(b *testing.B) {
	a := ask(spec.TierDeadline, 52*time.Hour,
		withMemory(pool("a", nil), memoryOf(builtin(5*time.Hour, time.Hour, 30))),
		withMemory(pool("b", nil), memoryOf(builtin(2*time.Hour, 2*time.Hour, 30))))
	a.Alternatives, a.Windows = true, DefaultWindows
	for b.Loop() {
		if _, err := Estimate(a); err != nil {
			b.Fatal(err)
		}
	}
}

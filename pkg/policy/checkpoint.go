package policy

import (
	"math"
	"time"
)

// CheckpointInterval is the Young/Daly optimum sqrt(2 × write × mtbp)
// between checkpoints, clamped to [lo, hi]: checkpointing more often
// spends more on writes, less often loses more work to each preemption.
// A non-positive write or mtbp gives lo and hi respectively.
func CheckpointInterval(write, mtbp, lo, hi time.Duration) time.Duration {
	switch {
	case write <= 0:
		return lo
	case mtbp <= 0:
		return hi
	}
	d := time.Duration(math.Sqrt(2 * float64(write) * float64(mtbp)))
	return min(max(d, lo), hi)
}

// CheckpointLog accumulates what sets a pool's checkpoint interval: the
// time runs held instances of the pool, the preemptions they suffered,
// and how long checkpoint writes took. It is plain data: a workflow keeps
// one per pool in its state, starting from the log of earlier runs (see
// Add), so the interval learns from this run and the ones before.
type CheckpointLog struct {
	Held        time.Duration `json:"held"`
	Preemptions int           `json:"preemptions"`
	Writes      int           `json:"writes"`
	WriteTime   time.Duration `json:"write_time"`
}

// Ran records d held on the pool.
func (l *CheckpointLog) Ran(d time.Duration) {
	if d > 0 {
		l.Held += d
	}
}

// Preempted records one preemption.
func (l *CheckpointLog) Preempted() { l.Preemptions++ }

// Wrote records one checkpoint write that took d.
func (l *CheckpointLog) Wrote(d time.Duration) {
	if d >= 0 {
		l.Writes++
		l.WriteTime += d
	}
}

// Add returns the two logs combined, such as earlier runs' and this one's.
func (l CheckpointLog) Add(o CheckpointLog) CheckpointLog {
	return CheckpointLog{
		Held: l.Held + o.Held, Preemptions: l.Preemptions + o.Preemptions,
		Writes: l.Writes + o.Writes, WriteTime: l.WriteTime + o.WriteTime,
	}
}

// MeanWrite is the mean write time, 0 before any write.
func (l CheckpointLog) MeanWrite() time.Duration {
	if l.Writes == 0 {
		return 0
	}
	return l.WriteTime / time.Duration(l.Writes)
}

// MTBP is the mean time between preemptions. prior counts as one
// preemption-free stretch already seen, so a pool that has not been
// preempted yet is neither trusted forever nor distrusted at once.
func (l CheckpointLog) MTBP(prior time.Duration) time.Duration {
	return (l.Held + prior) / time.Duration(l.Preemptions+1)
}

// Interval is the checkpoint interval for `interval: auto`: Young/Daly
// from the measured write time and the pool's MTBP, within [lo, hi];
// until a write has been measured, lo.
func (l CheckpointLog) Interval(prior, lo, hi time.Duration) time.Duration {
	return CheckpointInterval(l.MeanWrite(), l.MTBP(prior), lo, hi)
}

package workflows

import (
	"errors"
	"strconv"

	"go.temporal.io/sdk/temporal"

	"refuel/activities"
	"refuel/pkg/capacity"
)

// How an attempt ended, every rank's end taken together: the verdict
// the host acts on.

// nodeEnd is how one rank's attempt ended.
type nodeEnd struct {
	lease *Lease
	end   attemptEnd
}

// ending is what an attempt's end comes to, every rank's end taken
// together.
type ending int

const (
	// endStopped: stopped at a checkpoint or cancelled, for a pause, a
	// yield, a spent budget or a cancel.
	endStopped ending = iota
	endCompleted
	endCheckpointsFailed // no checkpoint verifies: the workload ends
	endTrainerFailed     // a rank's trainer failed
	endLost              // a rank's instance was taken or went silent
	// The market's own ends: its policy moved the workload, its account says
	// the work is done, or it took a spot instance back.
	endMoved
	endDone
	endTaken
	// endChangedOver: stopped at a checkpoint to move to the instance
	// the market acquired to change over to (verdict.standby).
	endChangedOver
)

// verdict is how an attempt's end is classified.
type verdict struct {
	ending ending
	end    attemptEnd // rank 0's
	// failed: a rank's trainer failed; message is what the last one
	// that failed said.
	failed  bool
	message string
	lost    []nodeEnd // the ranks lost, in rank order
	// silent is a gang's rank lost without a word when the market took
	// it (endTaken): a fault besides.
	silent *nodeEnd
	// standby is what the workload changes over to (endChangedOver).
	standby *Lease
}

// lost reports whether the rank's instance was taken or went silent: a
// rank stopped by cancellation, or whose checkpoints fail to verify, is
// not lost, and neither is one that ended in an outcome the workload knows
// otherwise.
func (n nodeEnd) lost() bool {
	var canceled *temporal.CanceledError
	if err := n.end.err; err != nil {
		return !errors.As(err, &canceled) && !failedOn(err, string(capacity.CheckpointFault))
	}
	switch n.end.res.Outcome {
	case activities.OutcomeCompleted, activities.OutcomeFailed, activities.OutcomeStopped, activities.OutcomeGangStopped:
		return false
	}
	return true // taken with notice, or an end no agent reports: gone either way
}

// noticed reports whether the rank's instance was taken with notice.
func (n nodeEnd) noticed() bool {
	return n.end.err == nil && n.end.res.Outcome == activities.OutcomePreempted
}

// message is what the failure a lost rank books says.
func (n nodeEnd) message() string {
	if n.end.err != nil {
		return n.end.err.Error()
	}
	return "the attempt ended with outcome " + strconv.Quote(string(n.end.res.Outcome))
}

// classify makes one verdict of every rank's end: the market's own end
// of the attempt, where it stopped it, in the order the market says
// (market.ended), then completion, checkpoints that fail to verify, a
// trainer that failed, and nodes lost; otherwise the attempt was
// stopped.
func (a *attempt) classify(e attemptEnd, ends []nodeEnd) verdict {
	w := a.w
	v := verdict{end: e}
	for _, n := range ends {
		switch {
		case n.lost():
			v.lost = append(v.lost, n)
		case n.end.res.Outcome == activities.OutcomeFailed:
			v.failed, v.message = true, n.end.res.Message
		}
	}
	byMarket := w.market.ended(e, v.lost, w.nodes() > 1)
	switch {
	case byMarket != nil && byMarket.first:
		v.ending, v.silent = byMarket.ending, byMarket.silent
	case e.err == nil && e.res.Outcome == activities.OutcomeCompleted:
		v.ending = endCompleted
	case failedOn(e.err, string(capacity.CheckpointFault)):
		v.ending = endCheckpointsFailed
	case v.failed:
		v.ending = endTrainerFailed
	case byMarket != nil:
		v.ending, v.silent = byMarket.ending, byMarket.silent
	case len(v.lost) > 0:
		v.ending = endLost
	}
	return v
}

// failedOn reports whether err is an application error of the type.
func failedOn(err error, errType string) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == errType
}

// stoppedCleanly reports whether an attempt ended because it was stopped:
// at a checkpoint, by push, or cancelled; a gang's rank also when its
// trainer stopped because its gang did.
func stoppedCleanly(res activities.TrainingResult, err error) bool {
	var canceled *temporal.CanceledError
	stopped := res.Outcome == activities.OutcomeStopped || res.Outcome == activities.OutcomeGangStopped
	return (err == nil && stopped) || errors.As(err, &canceled)
}

// onJoinedMachine reports whether the lease is on a machine that joined
// the base group: its loss is the machine's, cause node-lost.
func onJoinedMachine(l *Lease) bool {
	return l != nil && l.Instance.Tags[capacity.TagJoined] != ""
}

// joinedMachineLost is the first of the nodes lost that ran on a machine
// that joined the base group, or nil.
func joinedMachineLost(lost []nodeEnd) *nodeEnd {
	for i := range lost {
		if onJoinedMachine(lost[i].lease) {
			return &lost[i]
		}
	}
	return nil
}

// endOf is how the lease's attempt ended, if it is among ends.
func endOf(ends []nodeEnd, l *Lease) *nodeEnd {
	for i := range ends {
		if ends[i].lease == l {
			return &ends[i]
		}
	}
	return nil
}

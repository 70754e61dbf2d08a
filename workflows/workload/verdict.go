package workload

import (
	"errors"
	"strconv"

	"go.temporal.io/sdk/temporal"

	"refuel/activities"
	"refuel/pkg/capacity"
)

// How an attempt ended, every rank's end taken together: the verdict
// the host acts on.

// NodeEnd is how one rank's attempt ended.
type NodeEnd struct {
	Lease *Lease
	End   AttemptEnd
}

// Ending is what an attempt's end comes to, every rank's end taken
// together.
type Ending int

const (
	// EndStopped: stopped at a checkpoint or cancelled, for a pause, a
	// yield, a spent budget or a cancel.
	EndStopped Ending = iota
	EndCompleted
	EndCheckpointsFailed // no checkpoint verifies: the workload ends
	EndTrainerFailed     // a rank's trainer failed
	EndLost              // a rank's instance was taken or went silent
	// The market's own ends: its policy moved the workload, its account says
	// the work is done, or it took a spot instance back.
	EndMoved
	EndDone
	EndTaken
	// EndChangedOver: stopped at a checkpoint to move to the instance
	// the market acquired to change over to (verdict.standby).
	EndChangedOver
)

// Verdict is how an attempt's end is classified.
type Verdict struct {
	Ending Ending
	End    AttemptEnd // rank 0's
	// Failed: a rank's trainer failed; message is what the last one
	// that failed said.
	Failed  bool
	Message string
	Lost    []NodeEnd // the ranks lost, in rank order
	// Silent is a gang's rank lost without a word when the market took
	// it (EndTaken): a fault besides.
	Silent *NodeEnd
	// Standby is what the workload changes over to (EndChangedOver).
	Standby *Lease
}

// lost reports whether the rank's instance was taken or went silent: a
// rank stopped by cancellation, or whose checkpoints fail to verify, is
// not lost, and neither is one that ended in an outcome the workload knows
// otherwise.
func (n NodeEnd) lost() bool {
	var canceled *temporal.CanceledError
	if err := n.End.Err; err != nil {
		return !errors.As(err, &canceled) && !FailedOn(err, string(capacity.CheckpointFault))
	}
	switch n.End.Res.Outcome {
	case activities.OutcomeCompleted, activities.OutcomeFailed, activities.OutcomeStopped, activities.OutcomeGangStopped:
		return false
	}
	return true // taken with notice, or an end no agent reports: gone either way
}

// Noticed reports whether the rank's instance was taken with notice.
func (n NodeEnd) Noticed() bool {
	return n.End.Err == nil && n.End.Res.Outcome == activities.OutcomePreempted
}

// message is what the failure a lost rank books says.
func (n NodeEnd) message() string {
	if n.End.Err != nil {
		return n.End.Err.Error()
	}
	return "the attempt ended with outcome " + strconv.Quote(string(n.End.Res.Outcome))
}

// Classify makes one verdict of every rank's end: the market's own end
// of the attempt, where it stopped it, in the order the market says
// (market.ended), then completion, checkpoints that fail to verify, a
// trainer that failed, and nodes lost; otherwise the attempt was
// stopped.
func (a *Attempt) Classify(e AttemptEnd, ends []NodeEnd) Verdict {
	w := a.W
	v := Verdict{End: e}
	for _, n := range ends {
		switch {
		case n.lost():
			v.Lost = append(v.Lost, n)
		case n.End.Res.Outcome == activities.OutcomeFailed:
			v.Failed, v.Message = true, n.End.Res.Message
		}
	}
	byMarket := w.Market.Ended(e, v.Lost, w.Nodes() > 1)
	switch {
	case byMarket != nil && byMarket.First:
		v.Ending, v.Silent = byMarket.Ending, byMarket.Silent
	case e.Err == nil && e.Res.Outcome == activities.OutcomeCompleted:
		v.Ending = EndCompleted
	case FailedOn(e.Err, string(capacity.CheckpointFault)):
		v.Ending = EndCheckpointsFailed
	case v.Failed:
		v.Ending = EndTrainerFailed
	case byMarket != nil:
		v.Ending, v.Silent = byMarket.Ending, byMarket.Silent
	case len(v.Lost) > 0:
		v.Ending = EndLost
	}
	return v
}

// FailedOn reports whether err is an application error of the type.
func FailedOn(err error, errType string) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == errType
}

// StoppedCleanly reports whether an attempt ended because it was stopped:
// at a checkpoint, by push, or cancelled; a gang's rank also when its
// trainer stopped because its gang did.
func StoppedCleanly(res activities.TrainingResult, err error) bool {
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
func joinedMachineLost(lost []NodeEnd) *NodeEnd {
	for i := range lost {
		if onJoinedMachine(lost[i].Lease) {
			return &lost[i]
		}
	}
	return nil
}

// endOf is how the lease's attempt ended, if it is among ends.
func endOf(ends []NodeEnd, l *Lease) *NodeEnd {
	for i := range ends {
		if ends[i].Lease == l {
			return &ends[i]
		}
	}
	return nil
}

package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"refuel/activities"
	"refuel/workflows"
)

// The slowest recoveries of a storm, phase by phase, read from their
// workflows' histories.

// slowRecovery is one run's recovery: from its preemption as the run
// recorded it to its resumption.
type slowRecovery struct {
	id       string
	from, to time.Time
}

// slowest is how many of the slowest recoveries the bench shows.
const slowest = 5

// phases are the moments of one recovery, from its history and what the
// trace saw of its replacement's agent; zero where none was seen.
type phases struct {
	notice    time.Time // the agent heard the notice
	released  time.Time // the run gave the instance back (Replace or Release started)
	acquired  time.Time // the replacement was launched (Replace or Acquire completed)
	started   time.Time // the cluster started the first RunTraining on the replacement
	received  time.Time // a RunTraining reached the replacement's agent (its poll's answer)
	heartbeat time.Time // the cluster took the agent's first heartbeat
	beatSent  time.Time // the agent sent it
	restored  time.Time // the agent's restore signal
	queue     string    // the replacement's task queue
	beatErr   string
	timeouts  int // RunTrainings that timed out meanwhile
	sends     int // RunTrainings scheduled on the replacement
}

// showSlowest logs the slowest recoveries, each with where it spent its
// time and what its history recorded meanwhile, offset from the
// preemption.
func (b *scaleBench) showSlowest(ctx context.Context, c client.Client, recs []slowRecovery) {
	slices.SortFunc(recs, func(x, y slowRecovery) int { return cmp.Compare(y.to.Sub(y.from), x.to.Sub(x.from)) })
	for _, rec := range recs[:min(slowest, len(recs))] {
		var timeline []string
		ph := phases{}
		scheduled := map[int64]string{} // scheduled event id → activity
		it := c.GetWorkflowHistory(ctx, rec.id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				timeline = append(timeline, "history: "+err.Error())
				break
			}
			at := ev.GetEventTime().AsTime()
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
			}
			if at.Before(rec.from.Add(-time.Minute)) || at.After(rec.to.Add(2*time.Second)) {
				continue
			}
			ph.add(ev, scheduled, rec)
			if at.Before(rec.from.Add(-2 * time.Second)) {
				continue
			}
			timeline = append(timeline, fmt.Sprintf("%+7.2fs %s", at.Sub(rec.from).Seconds(), describe(ev, scheduled)))
		}
		if s := b.trace.seen(rec.id, ph.started.Add(-time.Second)); !s.received.IsZero() {
			ph.received, ph.beatSent, ph.heartbeat, ph.beatErr, ph.queue = s.received, s.beatSent, s.beatTaken, s.beatErr, s.queue
		}
		b.say("slow recovery: %s took %.1fs: %s", rec.id, rec.to.Sub(rec.from).Seconds(), ph.String(rec.from))
		if ph.queue != "" {
			b.say("  its agent's polls: %s", b.trace.pollsAround(ph.queue, rec.from, rec.to))
		}
		for _, line := range timeline {
			b.say("  %s", line)
		}
	}
}

// add reads one event of a slow recovery's history into its phases.
func (ph *phases) add(ev *history.HistoryEvent, scheduled map[int64]string, rec slowRecovery) {
	at := ev.GetEventTime().AsTime()
	if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == workflows.SignalProgress {
		var p activities.Progress
		if converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &p) == nil {
			switch {
			case p.Kind == activities.ProgressNotice && !at.After(rec.from):
				ph.notice = p.Time
			case p.Kind == activities.ProgressRestored && !at.Before(rec.from):
				ph.restored = at
			}
		}
	}
	if at.Before(rec.from) {
		return
	}
	if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activities.RunTrainingName {
		ph.sends++
	}
	switch {
	case ev.GetActivityTaskStartedEventAttributes() != nil:
		switch scheduled[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] {
		case activities.ReplaceName, activities.ReleaseName:
			if ph.released.IsZero() {
				ph.released = at
			}
		case activities.RunTrainingName:
			if ph.started.IsZero() || at.Before(ph.started) {
				ph.started = at
			}
		}
	case ev.GetActivityTaskCompletedEventAttributes() != nil:
		switch scheduled[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
		case activities.ReplaceName, activities.AcquireName:
			ph.acquired = at
		}
	case ev.GetActivityTaskTimedOutEventAttributes() != nil:
		if scheduled[ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()] == activities.RunTrainingName {
			ph.timeouts++
		}
	}
}

// String is the phases as offsets from the preemption the run recorded.
func (ph phases) String(from time.Time) string {
	off := func(t time.Time) string {
		if t.IsZero() {
			return "unseen"
		}
		return fmt.Sprintf("%+.2fs", t.Sub(from).Seconds())
	}
	out := fmt.Sprintf("notice %s, released %s, acquired %s, agent started %s (the cluster started RunTraining %s), first heartbeat %s (sent %s), restore %s",
		off(ph.notice), off(ph.released), off(ph.acquired), off(ph.received), off(ph.started), off(ph.heartbeat), off(ph.beatSent), off(ph.restored))
	if ph.beatErr != "" {
		out += ", first heartbeat refused: " + ph.beatErr
	}
	if ph.sends > 1 {
		out += fmt.Sprintf("; RunTraining sent %d times", ph.sends)
	}
	if ph.timeouts > 0 {
		out += fmt.Sprintf(", %d timed out", ph.timeouts)
	}
	return out
}

// describe is one history event as a timeline line.
func describe(ev *history.HistoryEvent, scheduled map[int64]string) string {
	what := strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")
	if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
		what += " " + a.GetActivityType().GetName() + " on " + a.GetTaskQueue().GetName()
	}
	if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
		what += " " + scheduled[a.GetScheduledEventId()]
		if a.GetAttempt() > 1 {
			what += fmt.Sprintf(" (try %d)", a.GetAttempt())
		}
	}
	if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
		what += " " + scheduled[a.GetScheduledEventId()]
	}
	if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil {
		what += " " + scheduled[a.GetScheduledEventId()] + ": " + a.GetFailure().GetMessage()
	}
	if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
		what += " " + a.GetSignalName()
		var p activities.Progress
		if a.GetSignalName() == workflows.SignalProgress && converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &p) == nil {
			what += " " + string(p.Kind)
		}
	}
	if f := ev.GetActivityTaskFailedEventAttributes().GetFailure(); f != nil {
		what += " " + scheduled[ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()] + ": " + f.GetMessage()
	}
	if a := ev.GetWorkflowTaskTimedOutEventAttributes(); a != nil {
		what += " " + a.GetTimeoutType().String()
	}
	return what
}

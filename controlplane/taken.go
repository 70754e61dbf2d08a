package controlplane

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/workflows"
)

// DefaultReclaimEvery is how often the clouds that say what they took
// back are asked (Config.ReclaimEvery).
const DefaultReclaimEvery = 5 * time.Second

// tellTaken tells the run an instance is tagged with that its cloud took
// the instance at the end of an interruption notice
// (local.LauncherConfig.OnTaken), as a cloud's instance-state event does:
// a notice without time to checkpoint in leaves the agent nothing to
// say, and the run would otherwise learn it only at its heartbeat
// timeout. A run that already let the instance go ignores it.
func (s *Stack) tellTaken(id string) {
	if s.stopping.Load() {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, p := range s.clouds {
			inst, _, err := p.Describe(ctx, id)
			if err != nil {
				continue
			}
			s.tellRun(ctx, inst)
			return
		}
	}()
}

// tellRun signals instance-taken to the run inst is tagged with.
func (s *Stack) tellRun(ctx context.Context, inst capacity.Instance) {
	run := inst.Tags[capacity.TagRun]
	if run == "" {
		return
	}
	// Training runs, development environments and a serving service's
	// replicas take the signal; a capacity-only service finds its lost
	// replicas on its own (workflows/inference/loss.go).
	desc, err := s.Client.DescribeWorkflowExecution(ctx, run, "")
	if err != nil {
		return
	}
	if t := desc.GetWorkflowExecutionInfo().GetType().GetName(); !slices.Contains([]string{workflows.TrainingRunName, workflows.DevEnvironmentName, workflows.ServiceReplicaName}, t) {
		return
	}
	err = s.Client.SignalWorkflow(ctx, run, "", workflows.SignalInstanceTaken, workflows.InstanceTaken{InstanceID: inst.ID})
	var gone *serviceerror.NotFound
	if err != nil && !errors.As(err, &gone) && !s.stopping.Load() {
		s.log.Warn("cannot tell a run that its cloud took its instance; it learns at its heartbeat timeout",
			zap.String("run", run), zap.String("instance", inst.ID), zap.Error(err))
	}
}

// startReclaimWatch watches what the clouds among providers that say so
// take back (watchReclaims) until the stack stops.
func (s *Stack) startReclaimWatch(providers []capacity.Provider) {
	var reclaimers []capacity.Reclaimer
	for _, p := range providers {
		if r, ok := p.(capacity.Reclaimer); ok {
			reclaimers = append(reclaimers, r)
		}
	}
	every := s.cfg.ReclaimEvery
	if every == 0 {
		every = DefaultReclaimEvery
	}
	if len(reclaimers) == 0 || every < 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.watchReclaims(ctx, reclaimers, every)
	}()
	s.closers = append([]func(){func() { cancel(); <-done }}, s.closers...)
}

// watchReclaims asks each cloud that says which instances it took back
// (capacity.Reclaimer: EC2's spot terminations, Compute Engine's
// preemptions) for this deployment's, every every, and tells each
// instance's run once, so a run whose agent heard no notice, or had no
// time to report, recovers at once. It returns when ctx ends.
func (s *Stack) watchReclaims(ctx context.Context, reclaimers []capacity.Reclaimer, every time.Duration) {
	told := map[string]bool{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		told = s.tellReclaimed(ctx, reclaimers, told)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tellReclaimed tells the runs of the instances the clouds list as
// reclaimed that told does not hold, and returns the instances listed:
// those a cloud no longer lists need not be remembered. A cloud that
// cannot be asked keeps what was told of it.
func (s *Stack) tellReclaimed(ctx context.Context, reclaimers []capacity.Reclaimer, told map[string]bool) map[string]bool {
	now := map[string]bool{}
	tags := map[string]string{capacity.TagManagedBy: capacity.ManagedBy, capacity.TagDeployment: s.cfg.Deployment}
	for _, r := range reclaimers {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		insts, err := r.Reclaimed(actx, tags)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("cannot ask a cloud what it took back; its runs learn at their heartbeat timeout", zap.Error(err))
			}
			for id := range told {
				now[id] = true
			}
			continue
		}
		for _, inst := range insts {
			now[inst.ID] = true
			if told[inst.ID] {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			s.tellRun(sctx, inst)
			cancel()
		}
	}
	return now
}

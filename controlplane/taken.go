package controlplane

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"refuel/pkg/capacity"
	"refuel/workflows"
)

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
			run := inst.Tags[capacity.TagRun]
			if run == "" {
				return
			}
			// Training runs and development environments take the
			// signal; a service finds its lost replicas on its own
			// (workflows/inference/loss.go).
			desc, err := s.Client.DescribeWorkflowExecution(ctx, run, "")
			if err != nil {
				return
			}
			if t := desc.GetWorkflowExecutionInfo().GetType().GetName(); t != workflows.TrainingRunName && t != workflows.DevEnvironmentName {
				return
			}
			err = s.Client.SignalWorkflow(ctx, run, "", workflows.SignalInstanceTaken, workflows.InstanceTaken{InstanceID: id})
			var gone *serviceerror.NotFound
			if err != nil && !errors.As(err, &gone) && !s.stopping.Load() {
				s.log.Warn("cannot tell a run that its cloud took its instance; it learns at its heartbeat timeout",
					zap.String("run", run), zap.String("instance", id), zap.Error(err))
			}
			return
		}
	}()
}

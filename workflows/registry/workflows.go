package registry

import (
	"go.temporal.io/sdk/workflow"

	"refuel/workflows"
	"refuel/workflows/capacitypool"
	"refuel/workflows/environment"
	"refuel/workflows/inference"
	"refuel/workflows/instances"
	"refuel/workflows/training"
	"refuel/workflows/workload"
)

// Workflows are refuel's workflows with the options they run under. A
// worker registers the methods of one (see Register); every run records
// the options it starts under in its history and keeps them, so a replay,
// or a worker started with other options, decides as the run first did.
type Workflows struct {
	Run     workload.RunOptions
	Service inference.Options
}

// New returns the workflows with the default options.
func New() *Workflows {
	return &Workflows{Run: workload.DefaultRunOptions(), Service: inference.DefaultOptions()}
}

// Registry is what workers and replayers have in common.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register puts every workflow on r under its contract name.
func (w *Workflows) Register(r Registry) {
	r.RegisterWorkflowWithOptions((&training.Runs{Options: w.Run}).TrainingRun, workflow.RegisterOptions{Name: workflows.TrainingRunName})
	r.RegisterWorkflowWithOptions((&inference.Services{Options: w.Service}).InferenceService, workflow.RegisterOptions{Name: workflows.InferenceServiceName})
	r.RegisterWorkflowWithOptions(capacitypool.CapacityPool, workflow.RegisterOptions{Name: workflows.CapacityPoolName})
	r.RegisterWorkflowWithOptions(instances.InjectInterruption, workflow.RegisterOptions{Name: workflows.InjectInterruptionName})
	r.RegisterWorkflowWithOptions(instances.Janitor, workflow.RegisterOptions{Name: workflows.JanitorName})
	r.RegisterWorkflowWithOptions(capacitypool.BaseNode, workflow.RegisterOptions{Name: workflows.BaseNodeName})
	r.RegisterWorkflowWithOptions((&environment.Environments{Options: w.Run}).DevEnvironment, workflow.RegisterOptions{Name: workflows.DevEnvironmentName})
	r.RegisterWorkflowWithOptions((&inference.Replicas{Options: w.Run}).ServiceReplica, workflow.RegisterOptions{Name: workflows.ServiceReplicaName})
}

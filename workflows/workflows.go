package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// Workflows are refuel's workflows with the options they run under. A
// worker registers the methods of one (see Register); every run records
// the options it starts under in its history and keeps them, so a replay,
// or a worker started with other options, decides as the run first did.
type Workflows struct {
	Run     RunOptions
	Service ServiceOptions
}

// New returns the workflows with the default options.
func New() *Workflows {
	return &Workflows{Run: DefaultRunOptions(), Service: DefaultServiceOptions()}
}

// Registry is what workers and replayers have in common.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register puts every workflow on r under its contract name.
func (w *Workflows) Register(r Registry) {
	r.RegisterWorkflowWithOptions((&Runs{Options: w.Run}).TrainingRun, workflow.RegisterOptions{Name: TrainingRunName})
	r.RegisterWorkflowWithOptions((&Services{Options: w.Service}).InferenceService, workflow.RegisterOptions{Name: InferenceServiceName})
	r.RegisterWorkflowWithOptions(CapacityPool, workflow.RegisterOptions{Name: CapacityPoolName})
	r.RegisterWorkflowWithOptions(InjectInterruption, workflow.RegisterOptions{Name: InjectInterruptionName})
	r.RegisterWorkflowWithOptions(Janitor, workflow.RegisterOptions{Name: JanitorName})
	r.RegisterWorkflowWithOptions(BaseNode, workflow.RegisterOptions{Name: BaseNodeName})
	r.RegisterWorkflowWithOptions((&Environments{Options: w.Run}).DevEnvironment, workflow.RegisterOptions{Name: DevEnvironmentName})
}

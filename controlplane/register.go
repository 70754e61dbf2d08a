// Package controlplane assembles refuel's control plane: the embedded
// Temporal server and Web UI (unless an external cluster is configured),
// the providers, the worker on the "refuel" task queue with every workflow
// and activity registered, the janitor's schedule and the metrics
// endpoint. The worker binary and the end-to-end tests start the same
// Stack.
package controlplane

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"refuel/workflows/registry"

	"refuel/activities"
)

// Register puts every control-plane workflow, with the options it runs
// under, and every activity on a worker under its contract name. Replay
// tests register the same workflows, so the names a history was
// recorded with are the names registered.
func Register(w worker.Registry, wf *registry.Workflows, caps *activities.Capacity, jan *activities.Janitor, ws *activities.Workspaces, disp *activities.Dispatch) {
	wf.Register(w)
	acts := map[string]any{
		activities.ListOfferingsName:     caps.ListOfferings,
		activities.AcquireName:           caps.Acquire,
		activities.OpenMarketName:        caps.OpenMarket,
		activities.MarketAtName:          caps.MarketAt,
		activities.ProbeSpotName:         caps.ProbeSpot,
		activities.PoolCheckpointLogName: caps.PoolCheckpointLog,
		activities.ReleaseName:           caps.Release,
		activities.ReplaceName:           caps.Replace,
		activities.LostInstancesName:     caps.LostInstances,
		activities.StopInstanceName:      caps.StopInstance,
		activities.StartInstanceName:     caps.StartInstance,
		activities.StockHistoryName:      caps.StockHistory,
		activities.InterruptName:         caps.Interrupt,
		activities.DecideMarketName:      caps.DecideMarket,
		activities.ListManagedName:       jan.ListManagedInstances,
		activities.RunOwnsInstanceName:   jan.RunOwnsInstance,
		activities.EndedWorkflowsName:    jan.EndedWorkflows,
		activities.DeleteWorkspaceName:   ws.DeleteWorkspace,
		activities.TrainingReachName:     disp.TrainingReach,
	}
	for name, fn := range acts {
		w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

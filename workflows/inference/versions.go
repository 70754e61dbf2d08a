package inference

// Every workflow.GetVersion change ID, in the order they were added. Each
// marks runs (or pools, or services) whose commands changed; histories
// recorded before it replay the old branch. Each comment names what
// changed and the recorded history under tests/testdata/histories that
// holds the change's marker (tests/versions_test.go checks it does), or,
// where no recorded history reaches the change, the unit test that
// guards it. A new GetVersion call takes a constant declared here.
const (
	// replicaLossVersion: services ask the clouds, every
	// LossCheckInterval, whether they took back a replica's instance.
	// Recorded in inference-service-replica-lost.json.
	replicaLossVersion = "replica-loss"

	// forecastScalerVersion: services follow autoscale.ForecastScaler (a
	// family of forecasters chosen by what each would have cost, margins
	// from their own errors, ski-rental scale-in); those recorded before
	// it follow autoscale.Autoscaler. Recorded in inference-service.json.
	forecastScalerVersion = "forecast-scaler"

	// servingReplicasVersion: a service with a command runs each replica
	// as a ServiceReplica child (a workload: acquisition, attempt and
	// recovery of runs and environments) instead of acquiring it itself,
	// drains it on scale-in, and takes its balancer's traffic reports.
	// Only services with a command reach it. Recorded in
	// inference-service-serving.json; the history of one of its
	// replicas, a ServiceReplica, is recorded beside it (service-replica).
	servingReplicasVersion = "serving-replicas"

	// servingReleaseOrderVersion: a service with serving replicas scales
	// in burst before base, the dearest first, as services without a
	// command do, reading each replica's instance from what its
	// ServiceReplica child reported; before it, it knew no replica's
	// instance and went by id. Guarded by
	// TestServingScaleInGivesBackBurstBeforeBase.
	servingReleaseOrderVersion = "serving-release-order"

	// stoppedWarmVersion: a capacity-only service stops a warm-pool
	// entry's on-demand burst instance once acquired, where its provider
	// can (activities.StopInstance), books its time stopped at its
	// volume's price, and starts it (activities.StartInstance) when scale
	// out takes it. Recorded in inference-service-warm-stopped.json.
	stoppedWarmVersion = "stopped-warm"

	// fleetWarmVersion: a new service's ForecastScaler prices its
	// candidates on the warm entries the fleet holds, not the spec's
	// whole warm_pool (autoscale.ForecastScaler.PricesFleetWarm).
	// Recorded in inference-service-warm-stopped.json.
	fleetWarmVersion = "fleet-warm"

	// servingWarmVersion: a service with a command keeps its warm pool
	// as ServiceReplica children started warm (ReplicaInput.Warm): each
	// acquires its instance, stops it where its provider can, and waits
	// for SignalReplicaPromote, which scale-out sends before requesting
	// a cold replica. Before it, such a service kept no warm entries.
	// Recorded in inference-service-serving-warm.json.
	servingWarmVersion = "serving-warm"

	// staffsForLatencyVersion: a new service with a command puts a floor
	// under its ForecastScaler's replicas, staffed for slo.latency at a
	// tolerance steered by the requests its balancers answered late, and
	// eases its candidates' allowance while they are answered in time
	// (autoscale.ForecastScaler.StaffsForLatency). Recorded in
	// inference-service-serving.json; the one recorded before it is kept
	// beside it, named before-staffing.
	staffsForLatencyVersion = "staffs-for-latency"
)

package workflows

// Every workflow.GetVersion change ID, in the order they were added. Each
// marks runs (or pools, or services) whose commands changed; histories
// recorded before it replay the old branch. Each comment names what
// changed and the recorded history under tests/testdata/histories that
// holds the change's marker (tests/versions_test.go checks it does), or,
// where no recorded history reaches the change, the unit test that
// guards it. A new GetVersion call takes a constant declared here.
const (
	// capacityPoolVersion: runs ask the capacity pool for capacity; runs
	// recorded before it acquire on their own. Recorded in
	// training-run-drill.json.
	capacityPoolVersion = "capacity-pool"

	// cancelCheckpointVersion: runs cancelled while training wait for the
	// trainer's final checkpoint before releasing its instance; runs
	// recorded before it released at once. Recorded in
	// training-run-cancel.json.
	cancelCheckpointVersion = "cancel-waits-for-checkpoint"

	// specIDVersion: runs and services refuse a spec whose id is not
	// their workflow ID. No recorded run has another id; guarded by
	// TestRunDecodesItsInputStrictly.
	specIDVersion = "spec-id-is-workflow-id"

	// marketClockVersion: runs look for a market clock before acquiring;
	// runs recorded before it go straight to acquiring. Recorded in
	// training-run-market-time.json.
	marketClockVersion = "market-clock"

	// waitForSpotVersion: a deadline run that finds no spot asks refuel
	// whether to wait for it or take on-demand now. Recorded in
	// training-run-wait-for-spot.json.
	waitForSpotVersion = "wait-for-spot"

	// backToSpotVersion: a deadline run on on-demand asks refuel whether
	// to go back to spot. Recorded in training-run-back-to-spot.json.
	backToSpotVersion = "back-to-spot"

	// stockHistoryVersion: runs plan both decisions with what all runs
	// saw of the spot offerings' stock (the market memory,
	// activities/market_memory.go). Recorded in
	// training-run-wait-for-spot.json.
	stockHistoryVersion = "stock-history"

	// optionsVersion: runs and services record their options in their
	// history when they first start; those recorded before it use the
	// options of the worker that replays them. Recorded in
	// training-run-drill.json and inference-service.json.
	optionsVersion = "options-in-history"

	// replicaLossVersion: services ask the clouds, every
	// LossCheckInterval, whether they took back a replica's instance.
	// Recorded in inference-service-replica-lost.json.
	replicaLossVersion = "replica-loss"

	// budgetVersion: runs watch their budget (budget_usd) while they
	// train. Recorded in training-run-budget.json.
	budgetVersion = "budget"

	// pushControlVersion: runs stop attempts by push; runs recorded
	// before it cancel the training activity, which reaches the agent
	// with a heartbeat. Recorded in training-run-pause-resume.json.
	pushControlVersion = "push-control"

	// continueWhileTrainingVersion: runs continue as new while they
	// train. Recorded in training-run-pause-resume.json.
	continueWhileTrainingVersion = "continue-while-training"

	// autoCheckpointVersion: runs ask the pool's checkpoint log before
	// each attempt (interval: auto). No recorded run asks for it; guarded
	// by TestAutoCheckpointIntervalLearnsFromThePool.
	autoCheckpointVersion = "auto-checkpoint-log"

	// restartBackoffVersion: runs wait, with jitter, before acquiring
	// again after a fault; runs recorded before it re-acquired at once.
	// Recorded in training-run-agent-killed.json.
	restartBackoffVersion = "restart-backoff"

	// silentLossVersion: runs count an instance lost without a word from
	// what its agent last reported (observeLastHeartbeat), the work since
	// the latest checkpoint lost. Recorded in
	// training-run-agent-killed.json.
	silentLossVersion = "silent-loss-from-heartbeat"

	// poolAtScaleVersion: pools take signals in batches (one schedule
	// pass for all the signals a workflow task brings), send grants and
	// yields without waiting for each to be delivered, check owners in
	// the background, and decide by admission.GangRules. Generations
	// recorded before it replay signal by signal under the one-node
	// rules. Recorded in capacity-pool.json.
	poolAtScaleVersion = "pool-at-scale"

	// plansVersion: runs ask the worker's shared plans for their market
	// decisions (the DecideMarket local activity, its answer recorded in
	// history); runs recorded before it solved each plan in workflow
	// code, again on every replay. Recorded in
	// training-run-wait-for-spot.json.
	plansVersion = "plans-in-activities"

	// pricedZonesVersion: runs place each zone in its region at its own
	// prices when refuel decides their market, and count what moving the
	// checkpoint to another region costs; runs recorded before it
	// planned every zone at one price and moved for nothing. Recorded in
	// training-run-back-to-spot.json.
	pricedZonesVersion = "priced-zones"

	// rideOutVersion: runs attach again to an attempt whose heartbeats
	// stopped while its cloud still runs the instance; runs recorded
	// before it counted the instance lost at once. Recorded in
	// training-run-agent-killed.json.
	rideOutVersion = "ride-out-control-plane"

	// oneTripRecoveryVersion: single-node runs recover from a lost
	// instance in fewer round trips: the lost instance is given back by
	// the activity that acquires its replacement (Replace), and the run's
	// search attributes are written once per workflow task. Runs recorded
	// before it release, then acquire, and write each attribute as it
	// changes. Recorded in training-run-drill.json.
	oneTripRecoveryVersion = "one-trip-recovery"

	// elasticGangVersion: an elastic gang (resources.min_nodes below
	// resources.nodes) trains on the nodes it holds when a lost node's
	// replacement takes longer than resources.shrink_after, and grows
	// back at a checkpoint (training_elastic.go). Only elastic specs reach
	// it. Recorded in training-run-elastic-gang-drill.json.
	elasticGangVersion = "elastic-gang"

	// gangSpotVersion: gangs of deadline tier wait for spot and go back
	// to it as one node does; gangs recorded before were spot first with
	// on-demand fallback. Recorded in training-run-gang-back-to-spot.json.
	gangSpotVersion = "gang-spot"

	// poolMovesUnfilledGangsVersion: pools move a burst gang that has not
	// acquired every node onto free base at once
	// (admission.UnfilledGangRules); those recorded before waited for its
	// gang_timeout. Recorded in capacity-pool.json.
	poolMovesUnfilledGangsVersion = "pool-moves-unfilled-gangs"

	// poolMovesUnfilledRunsVersion: pools move a run of one node waiting
	// on its burst grant onto free base at once (admission.UnfilledRules);
	// those recorded before left it on burst. Recorded in
	// capacity-pool.json.
	poolMovesUnfilledRunsVersion = "pool-moves-unfilled-runs"

	// gangClockVersion: gangs look for a market clock too, and follow it
	// as `starter sim --nodes N [--min-nodes M]` replays them, deciding on
	// counts (training_clocked.go); gangs recorded before it go straight
	// to acquiring in wall time. Recorded in
	// training-run-market-time-gang.json.
	gangClockVersion = "gang-market-clock"

	// forecastScalerVersion: services follow autoscale.ForecastScaler (a
	// family of forecasters chosen by what each would have cost, margins
	// from their own errors, ski-rental scale-in); those recorded before
	// it follow autoscale.Autoscaler. Recorded in inference-service.json.
	forecastScalerVersion = "forecast-scaler"

	// instanceTakenVersion: a run told by its control plane that the
	// cloud took an attempt's instance (instance-taken) settles the
	// attempt at once, as a preemption; runs recorded before it waited
	// for the attempt's heartbeat timeout. Only that signal reaches it.
	// Recorded in training-run-taken-without-grace.json; guarded by
	// TestTakenInstanceEndsTheAttemptAtOnce.
	instanceTakenVersion = "instance-taken"

	// resendVersion: a run of one node that hears nothing from the agent
	// of an attempt within ResendAfter sends the attempt's RunTraining
	// again (attempt.send); runs recorded before it sent it once and
	// waited for the heartbeat timeout. Recorded in
	// training-run-resent.json and training-run-taken-without-grace.json;
	// guarded by TestUnheardAttemptIsSentAgain.
	resendVersion = "resend-unheard-attempt"
)

package workload

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

	// SpecIDVersion: runs and services refuse a spec whose id is not
	// their workflow ID. No recorded run has another id; guarded by
	// TestRunDecodesItsInputStrictly.
	SpecIDVersion = "spec-id-is-workflow-id"

	// optionsVersion: runs and services record their options in their
	// history when they first start; those recorded before it use the
	// options of the worker that replays them. Recorded in
	// training-run-drill.json and inference-service.json.
	optionsVersion = "options-in-history"

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

	// restartBackoffVersion: runs wait, with jitter, before acquiring
	// again after a fault; runs recorded before it re-acquired at once.
	// Recorded in training-run-agent-killed.json.
	restartBackoffVersion = "restart-backoff"

	// silentLossVersion: runs count an instance lost without a word from
	// what its agent last reported (observeLastHeartbeat), the work since
	// the latest checkpoint lost. Recorded in
	// training-run-agent-killed.json.
	silentLossVersion = "silent-loss-from-heartbeat"

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
	// back at a checkpoint (training/elastic.go). Only elastic specs reach
	// it. Recorded in training-run-elastic-gang-drill.json.
	elasticGangVersion = "elastic-gang"

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

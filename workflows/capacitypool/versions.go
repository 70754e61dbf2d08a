package capacitypool

// Every workflow.GetVersion change ID, in the order they were added. Each
// marks runs (or pools, or services) whose commands changed; histories
// recorded before it replay the old branch. Each comment names what
// changed and the recorded history under tests/testdata/histories that
// holds the change's marker (tests/versions_test.go checks it does), or,
// where no recorded history reaches the change, the unit test that
// guards it. A new GetVersion call takes a constant declared here.
const (
	// poolAtScaleVersion: pools take signals in batches (one schedule
	// pass for all the signals a workflow task brings), send grants and
	// yields without waiting for each to be delivered, check owners in
	// the background, and decide by admission.GangRules. Generations
	// recorded before it replay signal by signal under the one-node
	// rules. Recorded in capacity-pool.json.
	poolAtScaleVersion = "pool-at-scale"

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
)

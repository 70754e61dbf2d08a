package training

// Every workflow.GetVersion change ID, in the order they were added. Each
// marks runs (or pools, or services) whose commands changed; histories
// recorded before it replay the old branch. Each comment names what
// changed and the recorded history under tests/testdata/histories that
// holds the change's marker (tests/versions_test.go checks it does), or,
// where no recorded history reaches the change, the unit test that
// guards it. A new GetVersion call takes a constant declared here.
const (
	// cancelCheckpointVersion: runs cancelled while training wait for the
	// trainer's final checkpoint before releasing its instance; runs
	// recorded before it released at once. Recorded in
	// training-run-cancel.json.
	cancelCheckpointVersion = "cancel-waits-for-checkpoint"

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

	// autoCheckpointVersion: runs ask the pool's checkpoint log before
	// each attempt (interval: auto). No recorded run asks for it; guarded
	// by TestAutoCheckpointIntervalLearnsFromThePool.
	autoCheckpointVersion = "auto-checkpoint-log"

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

	// gangSpotVersion: gangs of deadline tier wait for spot and go back
	// to it as one node does; gangs recorded before were spot first with
	// on-demand fallback. Recorded in training-run-gang-back-to-spot.json.
	gangSpotVersion = "gang-spot"

	// gangClockVersion: gangs look for a market clock too, and follow it
	// as `starter sim --nodes N [--min-nodes M]` replays them, deciding on
	// counts (clocked.go); gangs recorded before it go straight
	// to acquiring in wall time. Recorded in
	// training-run-market-time-gang.json.
	gangClockVersion = "gang-market-clock"

	// rulesVersion: runs decide their market by the latest of refuel's
	// rules (policy.RulesLatest), the version GetVersion returns, as
	// `starter sim` replays them; a later version of the rules raises
	// its maximum, and a run keeps the version it recorded. Runs
	// recorded before it decide by version 0. Recorded in
	// training-run-market-time.json (version 6, policy.RulesSpotElsewhere;
	// version 5 in training-run-market-time-before-spot-elsewhere.json).
	rulesVersion = "refuel-rules"

	// learnsByTryingVersion: runs on a market clock know the stock of a
	// zone they do not hold only by trying spot there (a refusal costs
	// nothing, and the run decides again) and from refuel's probes, each
	// taken one billed a minute of spot, as `starter sim` replays them by
	// default; runs recorded before it saw every zone's stock at every
	// tick, as `starter sim --sees-every-zone` replays them. Recorded in
	// training-run-market-time.json, training-run-market-time-gang.json
	// and training-run-market-time-elastic-gang.json; the runs before it
	// are kept under those names ending -before-learns-by-trying.
	learnsByTryingVersion = "clocked-learns-by-trying"

	// acquiresProbesVersion: refuel's probes on a market clock are
	// acquisitions through the run's provider (activities.ProbeSpot), for
	// the gang's nodes and let go at once, and what they had is what the
	// run knows of the zone; runs recorded before it answered their probes
	// from the market's stock at the tick. Recorded in
	// training-run-market-time.json, training-run-market-time-gang.json
	// and training-run-market-time-elastic-gang.json; the runs before it
	// are kept under those names ending -before-probes-acquire.
	acquiresProbesVersion = "clocked-probes-acquire"
)

// Package estimate says, before a run is submitted, what it will cost and
// when it will finish: for its JobSpec as written, for the other tiers and
// for deadlines of 1.1, 1.5 and 2 times its work, the cost's spread (p10,
// p50, p90) beside on-demand's for the same work, the finish time (p50,
// p90), the share of replays that met the deadline, and the offerings the
// policy used.
//
// It replays the run's own policy (pkg/policy, through pkg/replay, as
// `starter sim` does) over windows of the market the run will meet. Each
// pool's spot stock comes from one of two sources:
//
//   - the deployment's market memory (pkg/marketmem): its stock log holds,
//     per age, how long stretches in and out of stock were watched and how
//     many ended, which is a semi-Markov model of the pool (the model
//     refuel's policy plans with); each window draws a fresh path from it,
//     and the replayed policy plans with the memory as a live run does;
//   - where the memory has watched the pool too little, a trace of the
//     built-in market (pkg/cloud/sim's embedded traces), whose windows are
//     spread over it.
//
// The package is pure: it starts, reserves and writes nothing, and the
// same ask gives the same report.
package estimate

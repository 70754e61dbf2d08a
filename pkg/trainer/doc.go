// Package trainer is the demo trainer: mini-batch SGD on a synthetic
// linear-regression problem, deterministic to the bit, that honours the
// node agent's trainer contract (design section 3). It is the `trainer`
// subcommand of the worker binary and what the interruption drill runs.
//
// # The problem
//
// A seed defines everything. The true weights are drawn from PCG(seed, 0);
// step n (0-based) trains on a mini-batch of 32 samples drawn from a PCG
// seeded by (seed, n) alone, so resuming needs the weights and the step and
// no generator state. Features and labels are uniform in [-1, 1) and every
// product is rounded before it is summed, so the same weights come out on
// every platform. Train runs the whole problem in memory and is the
// reference a resumed run must match bit for bit.
//
// # The contract with the node agent
//
// Flags (args after the subcommand name):
//
//	--steps T              total steps; required, at least 1
//	--checkpoint-every K   checkpoint whenever the step is a multiple of K (default 50; 0: only at the end and on SIGTERM)
//	--step-time D          pace each step to take at least D of wall time (default 100ms; 0: as fast as possible)
//	--seed S               problem seed (default 1)
//	--features F           number of weights (default 64)
//
// Environment: REFUEL_CHECKPOINT_DIR names the checkpoint directory and is
// required; it is created if absent.
//
// On start the trainer resumes from the highest-numbered directory
// step-<N> in $REFUEL_CHECKPOINT_DIR (N decimal; zero padding accepted)
// that reads back whole: one missing model.bin or state.json, or whose
// files disagree, is skipped for the next lower one. Hidden entries,
// including the trainer's own ".tmp-…" directories, are never read.
// Without a usable checkpoint it starts at step 0. A checkpoint of another
// seed or feature count, or beyond T, is an error.
//
// A checkpoint step-<N> holds the weights after N steps:
//
//	model.bin    the weights as little-endian float64, Features×8 bytes
//	state.json   {"step":N,"total":T,"seed":S,"loss":L,"features":F,"digest":"<sha256 hex of model.bin>"}
//
// It is written into a temp directory named ".tmp-step-<N>-…", both files
// and the directory are fsynced, and the directory is renamed to step-<N>
// (then the parent is fsynced), so step-<N> appears whole or not at all. A
// step-<N> already present (one skipped as unreadable) is replaced.
// Checkpoints are written when N is a multiple of K, when N reaches T, and
// on SIGTERM or SIGINT: the trainer finishes the step it is in (pacing
// included), checkpoints it unless that step is already on disk, and exits.
//
// Stdout carries one protocol line per event:
//
//	REFUEL_PROGRESS step=<N> total=<T>      at start, after every checkpoint, otherwise at most every 100ms
//	REFUEL_STOPPED step=<N> total=<T>       last line after SIGTERM; step-<N> is on disk
//	REFUEL_DONE step=<T> total=<T> loss=<L> digest=<sha256 hex>   last line of a finished run; step-<T> is on disk
//
// The digest is Model.Digest, the sha256 of model.bin. Human-readable logs
// go to stderr.
//
// Exit codes: 0 when the run finished or was stopped and its checkpoint is
// on disk (the job is finished exactly when step-<T> exists); 1 when it
// failed (I/O error, unusable checkpoint directory, mismatched checkpoint);
// 2 for bad flags or a missing REFUEL_CHECKPOINT_DIR.
//
// # In-process
//
// Embedded is the same trainer as a function, for a node agent that runs
// it inside its own process (a virtual instance's): the same code from the
// flags on, so its checkpoints, protocol lines and final model are those
// of the process. Its environment is passed in, its SIGTERM is a
// cancelled context and its SIGKILL a closed channel (exit code 137).
package trainer

// Package trainer is the demo trainer: mini-batch SGD on a synthetic
// linear-regression problem, deterministic to the bit, that honours the
// node agent's trainer contract (docs/contracts.md). It is the `trainer`
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
//	--join-timeout D       in a gang: how long the ranks wait for each other to start (default 2m)
//	--peer-timeout D       in a gang: how long a step's exchange waits for another rank (default 1m)
//
// Environment: REFUEL_CHECKPOINT_DIR names the checkpoint directory and is
// required; it is created if absent. REFUEL_NUM_NODES above 1 makes the
// trainer one rank of a gang (below).
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
// failed (I/O error, unusable checkpoint directory, mismatched checkpoint,
// a gang that could not form); 2 for bad flags, a missing
// REFUEL_CHECKPOINT_DIR or a gang variable that does not parse.
//
// # A gang of nodes
//
// With REFUEL_NUM_NODES=N above 1 the trainer is rank REFUEL_NODE_RANK of
// N training data-parallel: every rank computes the gradient of its own
// shard of each step's batch (samples [r·32/N, (r+1)·32/N), drawn from the
// same generator as alone), rank 0 adds them to its own in rank order,
// takes the step and sends the new weights back. Rank 0 listens on
// REFUEL_MASTER_ADDR:REFUEL_MASTER_PORT; the others connect, retrying
// while rank 0 starts, and say which job (REFUEL_JOB_ID), attempt
// (REFUEL_ATTEMPT), rank and problem they are: rank 0 refuses a rank of
// another run or one already joined, saying why. Once all have joined,
// rank 0 sends the step and weights it resumed from its checkpoint
// directory; the others train from those and never read or write
// checkpoints of their own (the step the agent restored for them is only
// what they report if stopped before rank 0 answers). Gradients and
// weights cross the wire as their exact bits, so the gang's model is
// TrainGang(cfg, N)'s, computed in one process: the reference a gang's run
// must match bit for bit however often it is stopped and resumed, as
// Train is for one node. TrainGang(cfg, 1) is Train(cfg); other node
// counts group the sums otherwise and give other bits. Every attempt reads
// its gang's size anew, and a checkpoint holds the weights alone, so an
// elastic gang resumed on fewer or more nodes matches TrainWidths, the
// same reference with each step taken at the width the gang had then.
//
// Stopping a gang. SIGTERM on any rank stops the whole gang after the step
// under way: that rank's next gradient says so, and rank 0's answer to it
// tells every rank to stop; a SIGTERM on rank 0 goes out with its answer
// to the step under way. Every rank then ends at that step, rank 0 writes
// its checkpoint (when it is not on disk already) and each prints
// REFUEL_STOPPED with that step and exits 0.
//
// A rank that vanishes. Rank 0 takes a rank whose connection closes,
// fails or stays silent past --peer-timeout for gone: it ends the gang at
// the last step done, writes its checkpoint, prints REFUEL_STOPPED and
// exits 0, as if stopped. The other ranks, and every rank when rank 0
// vanishes, print REFUEL_STOPPED with their last step and exit 0: the gang
// resumes from rank 0's last checkpoint once the node is replaced. Once a
// rank is stopped it waits at most 10 seconds for another. A rank 0
// stopped before every rank joined tells those that did, which stop too.
//
// Joining. Ranks that do not all join within --join-timeout, and a rank
// whose rank 0 does not answer or refuses it, end with exit 1 and say
// why. Rank 0 also exits 1 when it cannot listen on the master address.
//
// # In-process
//
// Embedded is the same trainer as a function, for a node agent that runs
// it inside its own process (a virtual instance's): the same code from the
// flags on, so its checkpoints, protocol lines and final model are those
// of the process. Its environment is passed in, its SIGTERM is a
// cancelled context and its SIGKILL a closed channel (exit code 137).
package trainer

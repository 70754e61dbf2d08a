// Package agent is the node agent's supervisor: it runs a training command
// on an instance, keeps its checkpoints in a checkpoint.Store and stops it
// gracefully on a spot interruption notice or a stop request, the way
// managed spot training does. It knows nothing of Temporal: the training
// activity calls Run and turns its events into heartbeats.
//
// # Trainer contract
//
// Any program in any language can be a trainer. The agent runs it with
// these environment variables:
//
//   - REFUEL_CHECKPOINT_DIR: an absolute local directory the agent owns.
//   - REFUEL_JOB_ID: the job's id.
//   - REFUEL_INSTANCE_ID: the instance the trainer runs on.
//   - REFUEL_ATTEMPT: the number of this attempt of the run; later
//     attempts (after a preemption, a failure, a pause) have higher ones.
//   - REFUEL_CHECKPOINT_INTERVAL_SECONDS: how often to checkpoint, in
//     whole seconds, at least 1.
//
// In a gang of several nodes training one job (Config.Gang, Nodes above
// 1), every rank's trainer also gets these; a run of one node gets none:
//
//   - REFUEL_NODE_RANK: this node's rank, 0 to REFUEL_NUM_NODES-1.
//   - REFUEL_NUM_NODES: how many nodes train together in this attempt:
//     the world size, read anew by every attempt. An elastic gang
//     (resources.min_nodes) resumes on fewer nodes after a loss and on
//     more when it grows back, from a checkpoint that must not depend on
//     it; one that shrank to one node gets none of these variables.
//   - REFUEL_MASTER_ADDR, REFUEL_MASTER_PORT: where rank 0's trainer
//     listens for the others: rank 0's instance's address (loopback on the
//     local and simulated clouds, the private IP on EC2, as the instance
//     metadata service's local-ipv4 says) and a port the run chose.
//
// Environment. Besides those, the trainer gets the job's own variables
// (JobSpec env, Config.Env) and, of the agent's environment, only PATH,
// HOME, TZ, TMPDIR and the locale (LANG, LANGUAGE, LC_*). Nothing else of
// the agent's reaches it: its cloud credentials, Temporal API key and TLS
// settings and codec keys are not the job's. The job's env may replace
// PATH and the rest, but not the REFUEL_ variables above. Anything else
// the trainer needs (CUDA_VISIBLE_DEVICES, PYTHONPATH, its own
// credentials) goes in the job's env.
//
// Working directory. The command runs in the job's workdir (absolute, or
// relative to the node agent's directory without ..; default the
// attempt's scratch directory), which must exist: the job's code is on the
// instance, in its image. A program named with a slash (./train.sh,
// bin/train) is taken relative to the workdir; a bare name (python3) is
// looked up on the trainer's PATH, skipping relative entries.
//
// Resuming. Before the command starts, the agent empties
// $REFUEL_CHECKPOINT_DIR and downloads the job's latest good checkpoint
// into $REFUEL_CHECKPOINT_DIR/step-<N>, N in plain decimal (step-1200). The
// trainer resumes from the step-<N> directory with the highest N, comparing
// numbers rather than names; with none, it starts from scratch.
//
// Writing a checkpoint. The trainer creates a directory in
// $REFUEL_CHECKPOINT_DIR whose name starts with "." (for example
// .tmp-1300), writes its files there, and renames it to step-<N> when
// complete. The rename is what marks it complete, so never write into a
// step-<N> directory directly. The agent looks for new step-<N>
// directories every 200ms, uploads each one once in step order (data first,
// then a manifest with every file's sha256), keeps the newest Config.Keep
// in the store, and deletes older local step directories, keeping the
// newest. Only regular files are kept; symlinks and empty directories are
// not.
//
// Gangs. Every rank runs under an agent of its own, on its own instance,
// with the same directory layout, and every rank restores: the job's
// latest good checkpoint is in $REFUEL_CHECKPOINT_DIR/step-<N> on every
// node before its trainer starts. Rank 0's checkpoints are the job's: only
// rank 0's agent uploads the step-<N> directories its trainer completes as
// the job's checkpoints, reports them and prunes them to Config.Keep.
// A trainer of rank r above 0 that writes step-<N> directories the same
// way (.tmp-…, then the rename) writes its shards: its agent uploads each
// to <checkpoint url>/<job id>/shards/rank-<r>/step-<N>/ (data, then a
// manifest with sha256 sums, as for the job's), keeps the newest
// Config.Keep of them there, and reports none of them as checkpoints. When
// rank r restores the job's step N, its own shard of step N, if the store
// has one that verifies, is laid over it in the same step-<N> directory:
// the shard's files replace the job's of the same name, and the rest of
// the job's stay. A shard of another step is never restored, and one that
// does not verify is skipped, saying so: a gang resumes from the job's
// checkpoint, so whatever it needs from every rank to resume should reach
// rank 0's checkpoint or be written by each rank at the steps rank 0
// checkpoints. Ranks need not write checkpoints at all; a data-parallel
// trainer's rank 0 alone does.
//
// Stopping a gang. A notice or a stop request reaches only its own node's
// trainer, as SIGTERM. The ranks should agree on a step to stop at, rank 0
// writing its checkpoint, and exit. A trainer that stops because its gang
// stopped (another rank was stopped or preempted, or vanished), without a
// SIGTERM of its own, prints "REFUEL_STOPPED step=<N>" on stdout and exits
// 0: the agent reports it gang-stopped rather than completed, and uploads
// what it wrote (on rank 0, the job's final checkpoint) as after a stop.
// Exit 0 without that line means the job's work is done, as for one node.
//
// Progress. A line "REFUEL_PROGRESS step=<N>" or
// "REFUEL_PROGRESS step=<N> total=<T>" on stdout reports progress.
//
// Output. Every line of stdout and stderr is kept, in the order the agent
// reads them, with the agent's own lines (the command started, the
// checkpoint restored, notices, uploads, the exit) beside them: on the
// instance in Dir/logs (files 0600 in a 0700 directory, the newest
// LogOptions.LocalSegments segments), and in the job's checkpoint store
// under logs/attempt-<A>/<instance>/ (the newest StoreSegments), uploaded
// every LogOptions.UploadEvery and once more when the trainer has exited
// and its last checkpoint is up, a preemption's too. A line longer than
// 64 KiB is kept in pieces. `starter logs` reads them.
//
// Stopping. On a spot interruption notice, or when the agent is asked to
// stop, the trainer's process group gets SIGTERM. The trainer should then
// write a final checkpoint as above and exit; the agent uploads it. For a
// notice it has until the termination time the notice gives (two minutes
// after the notice when it gives none) less Config.UploadMargin (at most a quarter of the window), kept for
// the upload; for a stop request it has Config.StopGrace. After that the
// whole process group is killed with SIGKILL. The trainer is also killed
// if the agent itself dies.
//
// In-process trainers. A trainer may also be a Func run inside the
// agent's process (Config.Func), as the demo trainer is on a virtual
// instance: it gets the same environment as a list, writes its
// checkpoints, progress lines and logs the same way, and its stop is the
// cancellation of its context with the same grace; when the grace runs
// out its kill channel closes, as SIGKILL would end a process.
//
// Virtual instances. An agent that runs inside its cloud's process hears
// its notices from a NoticeSource the moment they are published, instead
// of polling the metadata service, and runs on a Machine: when the cloud
// takes the instance, the Machine is killed, the trainer with it, and
// nothing more is uploaded or reported, as when a real machine loses its
// power.
//
// Exit status. Exit 0 means the job's work is done (in a gang: unless
// after REFUEL_STOPPED, above); the agent uploads any checkpoint not yet
// uploaded and reports "completed". Any other exit,
// outside a stop, is reported as "failed" with the exit code and the last
// 20 lines of stderr (the whole output is in the store). A trainer that
// cannot start (no such workdir or program, an env entry no environment
// can hold) fails the same way, with exit code -1 and the reason. When the
// trainer exits, anything left in its process group is killed.
package agent

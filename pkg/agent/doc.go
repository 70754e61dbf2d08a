// Package agent is the node agent's supervisor: it runs a training command
// on an instance, keeps its checkpoints in a checkpoint.Store and stops it
// gracefully on a spot interruption notice or a stop request, the way
// managed spot training does. It knows nothing of Temporal: the training
// activity calls Run and turns its events into heartbeats.
//
// # Trainer contract
//
// Any program in any language can be a trainer. The agent runs it with
// these environment variables, in addition to its own and Config.Env:
//
//   - REFUEL_CHECKPOINT_DIR: an absolute local directory the agent owns.
//   - REFUEL_JOB_ID: the job's id.
//   - REFUEL_INSTANCE_ID: the instance the trainer runs on.
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
// Progress. A line "REFUEL_PROGRESS step=<N>" or
// "REFUEL_PROGRESS step=<N> total=<T>" on stdout reports progress. Other
// output is passed through untouched.
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
// Exit status. Exit 0 means the job's work is done; the agent uploads any
// checkpoint not yet uploaded and reports "completed". Any other exit,
// outside a stop, is reported as "failed" with the exit code and the last
// 20 lines of stderr. When the trainer exits, anything left in its process
// group is killed.
package agent

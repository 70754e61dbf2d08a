package checkpoint

import "fmt"

// NotFoundError means the job has no good checkpoint: none was written yet,
// or every one found was incomplete or corrupt.
type NotFoundError struct {
	URL string
	// Skipped lists the checkpoints that were found but could not be
	// trusted, newest first, so a caller can tell "fresh job" from "all
	// checkpoints lost".
	Skipped []*CorruptError
}

func (e *NotFoundError) Error() string {
	if len(e.Skipped) == 0 {
		return fmt.Sprintf("checkpoint: no checkpoint under %s", e.URL)
	}
	return fmt.Sprintf("checkpoint: no good checkpoint under %s (%d incomplete or corrupt skipped)", e.URL, len(e.Skipped))
}

// ForeignRunError means the job's newest checkpoint was written by another
// run with the same job id (a job submitted again, or a second stack on
// the same store): resuming from it would continue someone else's work.
type ForeignRunError struct {
	URL   string
	JobID string
	Step  int64
	// Run wrote the checkpoint; Want is the run that found it.
	Run, Want string
}

func (e *ForeignRunError) Error() string {
	return fmt.Sprintf("checkpoint: step %d under %s was written by another run of job %s (run %s; this is run %s): "+
		"refusing to resume from it. Remove %s if that work is done with, or give this job another id or another checkpoint.url",
		e.Step, e.URL, e.JobID, e.Run, e.Want, e.URL)
}

// CorruptError says why a checkpoint cannot be trusted: its manifest is
// missing or unreadable, or one of its files is missing or differs from the
// manifest.
type CorruptError struct {
	Step int64
	// File is the path relative to the checkpoint's data, or "manifest.json".
	File   string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("checkpoint: step %d: %s: %s", e.Step, e.File, e.Reason)
}

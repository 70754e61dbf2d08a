package checkpoint

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Manifest describes one complete checkpoint. It is stored as JSON next to
// the checkpoint's data and written after all of it.
type Manifest struct {
	JobID      string    `json:"job_id"`
	Step       int64     `json:"step"`
	CreatedAt  time.Time `json:"created_at"`
	InstanceID string    `json:"instance_id"`
	Files      []File    `json:"files"`
	// Run is the identity of the run that wrote it (a TrainingRun's
	// first run ID, the same across continue-as-new): a later run with
	// the same job id does not take it for its own. "" in checkpoints
	// written before manifests said.
	Run string `json:"run,omitempty"`
}

// File is one file of a checkpoint. Path is relative to the checkpoint's
// directory and always uses forward slashes.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

const (
	manifestName = "manifest.json"
	stepPrefix   = "step-"
)

// stepDir names a step's prefix. Zero-padding keeps the bucket's
// lexical listing in step order for people browsing it.
func stepDir(step int64) string {
	return fmt.Sprintf("%s%012d", stepPrefix, step)
}

// parseStepDir is the inverse of stepDir; it accepts any width.
func parseStepDir(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, stepPrefix)
	if !ok || digits == "" {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	step, err := strconv.ParseInt(digits, 10, 64)
	return step, err == nil
}

func manifestKey(step int64) string { return stepDir(step) + "/" + manifestName }

func dataKey(step int64, path string) string { return stepDir(step) + "/data/" + path }

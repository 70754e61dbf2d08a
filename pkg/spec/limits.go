package spec

import (
	"regexp"
	"time"
)

// Limits on what a spec may hold. A real job never comes near them; they
// keep what a spec turns into sane: workflow inputs (Temporal refuses
// payloads over 2 MB), search attributes (a Keyword is a 255-character
// column in SQL visibility stores), EC2 tags (values of at most 256
// characters) and instance environments. The README's JobSpec section and
// the JSON Schemas in docs/schema list them.
const (
	// MaxDocumentBytes bounds a JobSpec or ServiceSpec document.
	MaxDocumentBytes = 256 << 10

	// MaxIDLength bounds an id: it is the workflow ID, a task queue
	// name, a blob prefix and an EC2 tag value.
	MaxIDLength = 128
	// MaxTeamLength bounds a team: it is the RefuelTeam search attribute
	// and an EC2 tag value.
	MaxTeamLength = 64
	// MaxNameLength bounds an instance type, zone or provider name.
	MaxNameLength = 64

	MaxGPUs          = 64             // resources.gpus: GPUs one instance has
	MaxNodes         = 256            // resources.nodes: instances one job holds at once
	MaxShrinkAfter   = 24 * time.Hour // resources.shrink_after
	MaxInstanceTypes = 64             // resources.instance_types entries
	MaxZones         = 64             // resources.zones entries
	MaxProviders     = 16             // resources.providers entries
	MaxPricePerHour  = 1000           // USD per instance-hour, for max_price_per_hour and pools
	MaxBudgetUSD     = 1e7

	MaxCommandArgs      = 256     // command entries
	MaxCommandArgBytes  = 8 << 10 // one command entry
	MaxCommandBytes     = 64 << 10
	MaxEnvVars          = 128     // env entries
	MaxEnvKeyLength     = 128     // one env name
	MaxEnvValueBytes    = 8 << 10 // one env value
	MaxEnvBytes         = 64 << 10
	MaxWorkdirBytes     = 1024
	MaxCheckpointURL    = 2048 // checkpoint.url length
	MaxCheckpointKeep   = 100
	MaxRestarts         = 100
	MaxDurationText     = 32 // a duration written as text, such as checkpoint.interval
	MaxReplicas         = 1000
	MaxSchedules        = 32 // schedules entries
	MaxCronLength       = 128
	MaxTargetPerReplica = 1e6 // target.qps and target.queue_length
)

// Bounds of durations.
const (
	// MaxWork bounds work: a year.
	MaxWork = 366 * 24 * time.Hour
	// MaxDeadlineAhead bounds how far ahead a deadline may lie: ten years.
	MaxDeadlineAhead = 10 * 366 * 24 * time.Hour
	// MaxCheckpointInterval bounds checkpoint.interval, min_interval and
	// max_interval: a run risks at most a week of work.
	MaxCheckpointInterval = 7 * 24 * time.Hour
	// MaxServiceDelay bounds upscale_delay, downscale_delay, lead_time
	// and model_load.
	MaxServiceDelay = 24 * time.Hour
	// MaxWindow bounds a schedule window's duration.
	MaxWindow = 31 * 24 * time.Hour
)

// Patterns of names, as regular expressions (also in the JSON Schemas).
const (
	// IDPattern keeps ids usable as workflow ids, task queue names, blob
	// prefixes and cloud tags alike.
	IDPattern = `^[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?$`
	// TeamPattern allows what EC2 tags and search queries take as they are.
	TeamPattern = `^[A-Za-z0-9]([A-Za-z0-9 ._:/=+@-]{0,62}[A-Za-z0-9])?$`
	// NamePattern is an instance type, zone or provider name.
	NamePattern = `^[A-Za-z0-9]([A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$`
	// EnvKeyPattern is a POSIX environment variable name.
	EnvKeyPattern = `^[A-Za-z_][A-Za-z0-9_]*$`
)

// ReservedEnvPrefix starts the variables the node agent sets (the
// trainer contract); a spec's env may not set them.
const ReservedEnvPrefix = "REFUEL_"

var (
	idPattern     = regexp.MustCompile(IDPattern)
	teamPattern   = regexp.MustCompile(TeamPattern)
	namePattern   = regexp.MustCompile(NamePattern)
	envKeyPattern = regexp.MustCompile(EnvKeyPattern)
)

// Fixes that several fields share.
const (
	idFix   = "use 1-128 lower-case letters, digits, '.', '_' or '-', starting and ending with a letter or digit"
	teamFix = "use 1-64 letters, digits, spaces or . _ : / = + @ -, starting and ending with a letter or digit"
	nameFix = "use 1-64 letters, digits, '.', '_' or '-', starting and ending with a letter or digit"
)

// ValidName reports whether s is a valid instance type, zone or provider
// name (NamePattern), for the other documents that name them.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// NameFix says what a valid name is, for errors about one.
const NameFix = nameFix

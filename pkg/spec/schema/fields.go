package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/invopop/jsonschema"

	"refuel/pkg/spec"
)

// field is what the schema says of one field beyond its Go type: its
// description for people and its limits (package spec's, which
// validation enforces) for machines.
type field struct {
	doc   string
	limit func(*jsonschema.Schema)
}

var jobFields = merge(common, resources("GPUs one instance must have; 0 means 1."), map[string]field{
	"id":         {"Unique for good: the TrainingRun workflow ID, a task queue name, a checkpoint prefix and an instance tag.", text(spec.MaxIDLength, spec.IDPattern, 1)},
	"tier":       {"How much interruption the job tolerates: critical runs on stable capacity only (base or on-demand), deadline uses spot while its deadline allows, flexible uses spot only and waits while none is in stock. Default flexible.", enum(spec.TierCritical, spec.TierDeadline, spec.TierFlexible)},
	"deadline":   {"When the work must be done, RFC 3339 (YYYY-MM-DDThh:mm:ssZ); required for tier deadline, in the future, at most ten years ahead, and leaving room for the work.", nil},
	"work":       {"Estimated compute on one instance, such as 48h (a number is seconds); positive, at most 8784h (366 days).", nil},
	"command":    {fmt.Sprintf("The argv run on the instance; omit it to run the demo trainer for `work`. At most %d arguments of at most %d bytes each, %d bytes in all, no NUL bytes.", spec.MaxCommandArgs, spec.MaxCommandArgBytes, spec.MaxCommandBytes), list(spec.MaxCommandArgs, spec.MaxCommandArgBytes, "", false)},
	"command[]":  {"One argument.", nil},
	"checkpoint": {"Where checkpoints go, how often and how many are kept.", nil},
	"checkpoint.url": {fmt.Sprintf("A blob store: file:///path, s3://bucket/prefix, gs://bucket/prefix or mem://; default file://<data-dir>/checkpoints. At most %d characters.", spec.MaxCheckpointURL),
		text(spec.MaxCheckpointURL, "^(file|s3|gs|mem):", 0)},
	"checkpoint.interval": {"How often the trainer checkpoints: a duration such as 10m (more than 0, at most 168h), or auto for the Young/Daly optimum. Default auto.",
		func(s *jsonschema.Schema) {
			s.MaxLength = uint64p(spec.MaxDurationText)
			s.Pattern = autoOrDuration
		}},
	"checkpoint.min_interval":         {"The shortest interval auto chooses; default 10s, at most 168h.", nil},
	"checkpoint.max_interval":         {"The longest interval auto chooses; default 30m, at most 168h.", nil},
	"checkpoint.keep":                 {fmt.Sprintf("How many verified checkpoints are kept; older ones are pruned. 1 to %d; 0 means 3.", spec.MaxCheckpointKeep), intRange(0, spec.MaxCheckpointKeep)},
	"checkpoint.restart_from_scratch": {"When no checkpoint verifies, train again from step 0 instead of failing the run with a checkpoint failure. Default false.", nil},
	"budget_usd":                      {"The most the run may spend, in USD; reaching it checkpoints, releases and waits in state over-budget. 0 or absent: no budget; at most 10000000.", numRange(0, spec.MaxBudgetUSD)},
	"env": {fmt.Sprintf("Variables added to the trainer's environment. At most %d, names of letters, digits and _ (not starting with a digit, at most %d characters, not starting REFUEL_, which are the node agent's), values of at most %d bytes without NUL, %d bytes in all.", spec.MaxEnvVars, spec.MaxEnvKeyLength, spec.MaxEnvValueBytes, spec.MaxEnvBytes),
		func(s *jsonschema.Schema) {
			s.MaxProperties = uint64p(spec.MaxEnvVars)
			s.PropertyNames = &jsonschema.Schema{Pattern: spec.EnvKeyPattern, MaxLength: uint64p(spec.MaxEnvKeyLength), Not: &jsonschema.Schema{Pattern: "^" + spec.ReservedEnvPrefix}}
		}},
	"env{}":        {"The variable's value.", func(s *jsonschema.Schema) { s.MaxLength = uint64p(spec.MaxEnvValueBytes) }},
	"workdir":      {fmt.Sprintf("Where the command runs on the instance, and where a relative command is found: an absolute path, or one relative to the attempt's scratch directory that stays inside it. Default the scratch directory; at most %d bytes.", spec.MaxWorkdirBytes), text(spec.MaxWorkdirBytes, "", 0)},
	"max_restarts": {fmt.Sprintf("How many instance losses, agent failures and trainer failures the run tolerates before it fails; 0 to %d, default %d.", spec.MaxRestarts, spec.DefaultMaxRestarts), intRange(0, spec.MaxRestarts)},
	"policy":       {"The market policy a deadline or flexible run follows on a market with a clock of its own (the simulated cloud). Default refuel.", enum(spec.MarketPolicies...)},
})

var serviceFields = merge(common, resources("GPUs one replica's instance must have; 0 means 1."), map[string]field{
	"id":                       {"Unique for good: the InferenceService workflow ID and an instance tag.", text(spec.MaxIDLength, spec.IDPattern, 1)},
	"min_replicas":             {"The fewest replicas the service keeps, 0 to max_replicas.", intRange(0, spec.MaxReplicas)},
	"max_replicas":             {fmt.Sprintf("The most replicas the service may have, 1 to %d.", spec.MaxReplicas), intRange(1, spec.MaxReplicas)},
	"target":                   {"The load one replica should carry; at least one of its fields must be set, and with several the one asking for most replicas wins.", nil},
	"target.qps":               {"Requests per second one replica serves well; at most 1000000.", numRange(0, spec.MaxTargetPerReplica)},
	"target.queue_length":      {"Waiting requests per replica to allow; at most 1000000.", numRange(0, spec.MaxTargetPerReplica)},
	"target.gpu_utilization":   {"The busy share of a replica's GPUs to aim for, in (0, 1]; cannot alone wake a service scaled to zero.", numRange(0, 1)},
	"tolerance":                {"The fall in load, as a share of the replicas, ignored as noise; in [0, 1), default 0.1.", func(s *jsonschema.Schema) { s.Minimum, s.ExclusiveMaximum = "0", "1" }},
	"upscale_delay":            {"How long more replicas must be wanted before they are requested; default 0, at most 24h.", nil},
	"downscale_delay":          {"How long fewer replicas must be wanted before any is released; default 10m, at most 24h.", nil},
	"schedules":                {fmt.Sprintf("Windows with a replica floor, for load known in advance; at most %d.", spec.MaxSchedules), func(s *jsonschema.Schema) { s.MaxItems = uint64p(spec.MaxSchedules) }},
	"schedules[].cron":         {fmt.Sprintf("When the window opens: 5 cron fields (\"0 8 * * 1-5\") in UTC, a CRON_TZ=Area/City prefix, or @daily and the like; at most %d characters.", spec.MaxCronLength), text(spec.MaxCronLength, "", 1)},
	"schedules[].duration":     {"How long the window stays open; positive, at most 744h (31 days).", nil},
	"schedules[].min_replicas": {"The floor while the window is open, 0 to max_replicas.", intRange(0, spec.MaxReplicas)},
	"lead_time": {"How far ahead to scale: auto learns it from measured provision and model-load times, a duration (at most 24h) fixes it. Default auto.",
		func(s *jsonschema.Schema) {
			s.MaxLength = uint64p(spec.MaxDurationText)
			s.Pattern = autoOrDuration
		}},
	"warm_pool":          {"How many prepared instances to keep ready to join, 0 to max_replicas.", intRange(0, spec.MaxReplicas)},
	"model_load":         {"How long a replica takes from its instance running to serving; at most 24h.", nil},
	"placement":          {"Where replicas go once the base is full: spot-first (spot, on-demand when none) or on-demand. Default spot-first.", enum(spec.PlacementSpotFirst, spec.PlacementOnDemand)},
	"target.concurrency": {"Requests in flight per replica to aim for, as the service's balancers measure them; at most 1000000.", numRange(0, spec.MaxTargetPerReplica)},
	"command": {fmt.Sprintf("The model server each replica runs, listening on $REFUEL_PORT; omit it for a capacity-only service (replicas are instances held, nothing served). At most %d arguments of at most %d bytes each, %d bytes in all, no NUL bytes.", spec.MaxCommandArgs, spec.MaxCommandArgBytes, spec.MaxCommandBytes),
		list(spec.MaxCommandArgs, spec.MaxCommandArgBytes, "", false)},
	"command[]": {"One argument.", nil},
	"env": {fmt.Sprintf("Variables added to the server's environment (over the machine's; only with command). At most %d, names of letters, digits and _ (not starting with a digit, at most %d characters, not starting REFUEL_, which are the node agent's), values of at most %d bytes without NUL, %d bytes in all.", spec.MaxEnvVars, spec.MaxEnvKeyLength, spec.MaxEnvValueBytes, spec.MaxEnvBytes),
		func(s *jsonschema.Schema) {
			s.MaxProperties = uint64p(spec.MaxEnvVars)
			s.PropertyNames = &jsonschema.Schema{Pattern: spec.EnvKeyPattern, MaxLength: uint64p(spec.MaxEnvKeyLength), Not: &jsonschema.Schema{Pattern: "^" + spec.ReservedEnvPrefix}}
		}},
	"env{}":                   {"The variable's value.", func(s *jsonschema.Schema) { s.MaxLength = uint64p(spec.MaxEnvValueBytes) }},
	"workdir":                 {fmt.Sprintf("Where the server runs on the instance (only with command): an absolute path, or one relative to the replica's scratch directory that stays inside it; at most %d bytes.", spec.MaxWorkdirBytes), text(spec.MaxWorkdirBytes, "", 0)},
	"readiness":               {"When a replica takes requests: it is ready at the first 2xx answer to an HTTP GET of path (only with command).", nil},
	"readiness.path":          {fmt.Sprintf("The path probed, starting with /; default %s, at most %d bytes.", spec.DefaultReadinessPath, spec.MaxReadinessPathBytes), text(spec.MaxReadinessPathBytes, "^/", 0)},
	"readiness.initial_delay": {fmt.Sprintf("How long a server may take to become ready (its model load) before it is replaced; default %s, at most %s.", spec.DefaultInitialDelay, spec.MaxInitialDelay), nil},
	"readiness.period":        {fmt.Sprintf("How often the server is probed; default %s, %s to %s.", spec.DefaultReadinessPeriod, spec.MinReadinessPeriod, spec.MaxReadinessPeriod), nil},
	"readiness.timeout":       {fmt.Sprintf("How long one probe may take; default %s.", spec.DefaultReadinessTimeout), nil},
	"max_concurrency":         {fmt.Sprintf("Requests one replica takes at once; more wait in the balancer's queue. Default %d, at most %d (only with command).", spec.DefaultMaxConcurrency, spec.MaxConcurrency), intRange(0, spec.MaxConcurrency)},
	"queue_timeout":           {fmt.Sprintf("How long a request may wait in the balancer's queue before it is answered 503 with Retry-After; default %s, at most %s.", spec.DefaultQueueTimeout, spec.MaxQueueTimeout), nil},
	"drain_timeout":           {fmt.Sprintf("How long a replica being scaled in or interrupted finishes the requests it holds, taking no new ones, before it is released; default %s, at most %s.", spec.DefaultDrainTimeout, spec.MaxDrainTimeout), nil},
	"slo":                     {"What the service promises its callers (only with command).", nil},
	"slo.latency":             {fmt.Sprintf("A request answered within it counts as met; default %s, at most %s.", spec.DefaultSLOLatency, spec.MaxSLOLatency), nil},
})

var devFields = merge(common, resources("GPUs the environment's instance must have; 0 means 1."), map[string]field{
	"id":   {"Unique while the environment lives: the DevEnvironment workflow ID, its workspace's prefix in the store and an instance tag.", text(spec.MaxIDLength, spec.IDPattern, 1)},
	"tier": {"critical runs on stable capacity only (base or on-demand); flexible allows spot, and is replaced after a preemption with its workspace restored. Default critical.", enum(spec.DevTiers...)},
	"command": {fmt.Sprintf("The server the developer connects to (JupyterLab, sshd, code-server), listening on $REFUEL_PORT with its files in $REFUEL_WORKSPACE; required. At most %d arguments of at most %d bytes each, %d bytes in all, no NUL bytes.", spec.MaxCommandArgs, spec.MaxCommandArgBytes, spec.MaxCommandBytes),
		func(s *jsonschema.Schema) {
			list(spec.MaxCommandArgs, spec.MaxCommandArgBytes, "", false)(s)
			s.MinItems = uint64p(1)
		}},
	"command[]": {"One argument.", nil},
	"env": {fmt.Sprintf("Variables added to the command's environment. At most %d, names of letters, digits and _ (not starting with a digit, at most %d characters, not starting REFUEL_, which are the node agent's), values of at most %d bytes without NUL, %d bytes in all.", spec.MaxEnvVars, spec.MaxEnvKeyLength, spec.MaxEnvValueBytes, spec.MaxEnvBytes),
		func(s *jsonschema.Schema) {
			s.MaxProperties = uint64p(spec.MaxEnvVars)
			s.PropertyNames = &jsonschema.Schema{Pattern: spec.EnvKeyPattern, MaxLength: uint64p(spec.MaxEnvKeyLength), Not: &jsonschema.Schema{Pattern: "^" + spec.ReservedEnvPrefix}}
		}},
	"env{}":              {"The variable's value.", func(s *jsonschema.Schema) { s.MaxLength = uint64p(spec.MaxEnvValueBytes) }},
	"workspace":          {fmt.Sprintf("The absolute path on the instance whose files are saved to the store and restored wherever the environment runs next, in its plain form (no . or .. parts), not a directory of the system such as / or /etc. Default a directory of the environment's own; at most %d bytes.", spec.MaxWorkspaceBytes), text(spec.MaxWorkspaceBytes, "^/", 0)},
	"workspace_interval": {fmt.Sprintf("How often the workspace is saved while the environment runs (it is also saved when it stops, is moved or gets an interruption notice); default %s, %s to %s.", spec.DefaultWorkspaceInterval, spec.MinWorkspaceInterval, spec.MaxWorkspaceInterval), nil},
	"idle_timeout":       {fmt.Sprintf("How long the environment may go without a connection to its endpoint, GPU use or `starter dev touch` before it saves its workspace, gives its instance back and waits suspended; default %s, 0 never, otherwise %s to %s.", spec.DefaultIdleTimeout, spec.MinIdleTimeout, spec.MaxIdleTimeout), nil},
	"max_duration":       {"How long the environment may run at a time, such as 72h: then it suspends, as when idle, and resume starts it again; 0 or absent: no bound; at most 8784h (366 days).", nil},
	"budget_usd":         {"The most the environment may spend, in USD. 0 or absent: no budget; at most 10000000.", numRange(0, spec.MaxBudgetUSD)},
})

// common are the fields JobSpec and ServiceSpec share.
var common = map[string]field{
	"team":     {fmt.Sprintf("The team the work is for: the RefuelTeam search attribute, cost reports and an instance tag. At most %d letters, digits, spaces or . _ : / = + @ -, starting and ending with a letter or digit.", spec.MaxTeamLength), text(spec.MaxTeamLength, spec.TeamPattern, 0)},
	"priority": {"0 (lowest) to 100 (highest); higher may preempt lower training. Change it later with the set-priority update.", intRange(0, spec.MaxPriority)},
}

// resources are the fields of Resources, in both specs.
func resources(gpus string) map[string]field {
	name := fmt.Sprintf("1-%d letters, digits, '.', '_' or '-', starting and ending with a letter or digit", spec.MaxNameLength)
	return map[string]field{
		"resources":                    {"What an instance must have and what the work may pay. Empty lists mean any the providers offer.", nil},
		"resources.gpus":               {gpus + fmt.Sprintf(" At most %d.", spec.MaxGPUs), intRange(0, spec.MaxGPUs)},
		"resources.nodes":              {fmt.Sprintf("How many instances the job needs at once (a gang); 0 means 1, at most %d. A service's replicas take one node each.", spec.MaxNodes), intRange(0, spec.MaxNodes)},
		"resources.min_nodes":          {"The fewest nodes an elastic gang trains on: when a node is lost and no replacement comes within shrink_after, the gang resumes on the nodes it holds if they are at least this many, and grows back at a checkpoint. 0 or absent means nodes (a rigid gang). Services refuse it.", intRange(0, spec.MaxNodes)},
		"resources.shrink_after":       {fmt.Sprintf("How long an elastic gang waits for a lost node's replacement before it trains on fewer nodes; a duration such as 2m, default %s, at most %s. Services refuse it.", spec.DefaultShrinkAfter, spec.MaxShrinkAfter), nil},
		"resources.same_zone":          {"Keep a gang's nodes in one zone; default true.", nil},
		"resources.instance_types":     {fmt.Sprintf("Acceptable instance types, such as p3.2xlarge; at most %d, each %s.", spec.MaxInstanceTypes, name), list(spec.MaxInstanceTypes, spec.MaxNameLength, spec.NamePattern, true)},
		"resources.instance_types[]":   {"An instance type.", nil},
		"resources.zones":              {fmt.Sprintf("Acceptable zones, such as us-west-2a; at most %d, each %s.", spec.MaxZones, name), list(spec.MaxZones, spec.MaxNameLength, spec.NamePattern, true)},
		"resources.zones[]":            {"A zone.", nil},
		"resources.providers":          {fmt.Sprintf("Acceptable providers (sim, local, aws, the base group's); at most %d, each %s.", spec.MaxProviders, name), list(spec.MaxProviders, spec.MaxNameLength, spec.NamePattern, true)},
		"resources.providers[]":        {"A provider.", nil},
		"resources.max_price_per_hour": {fmt.Sprintf("The most a spot instance may cost, in USD per instance-hour; 0 or absent: no cap; at most %d.", spec.MaxPricePerHour), numRange(0, spec.MaxPricePerHour)},
	}
}

func merge(ms ...map[string]field) map[string]field {
	out := map[string]field{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// text limits a string's length (in characters, where spec counts bytes:
// the same for the ASCII the patterns allow) and pattern.
func text(most int, pattern string, least int) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		s.MaxLength = uint64p(most)
		if least > 0 {
			s.MinLength = uint64p(least)
		}
		s.Pattern = pattern
	}
}

func list(most, itemLength int, pattern string, unique bool) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		s.MaxItems = uint64p(most)
		s.UniqueItems = unique
		text(itemLength, pattern, 0)(s.Items)
	}
}

func intRange(lo, hi int) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		s.Minimum, s.Maximum = json.Number(strconv.Itoa(lo)), json.Number(strconv.Itoa(hi))
	}
}

func numRange(lo, hi float64) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		s.Minimum = json.Number(strconv.FormatFloat(lo, 'f', -1, 64))
		s.Maximum = json.Number(strconv.FormatFloat(hi, 'f', -1, 64))
	}
}

func enum[T ~string](values ...T) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		s.Enum = nil
		for _, v := range values {
			s.Enum = append(s.Enum, string(v))
		}
	}
}

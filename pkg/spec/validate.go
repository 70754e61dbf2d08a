package spec

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
)

// checkpointSchemes are the blob URL schemes refuel opens.
var checkpointSchemes = []string{"file", "s3", "gs", "mem"}

// Validate checks a normalised spec and returns a *ValidationError listing
// every problem, or nil. now is the time the job is submitted, used to
// check that a deadline lies in the future.
func (s *JobSpec) Validate(now time.Time) error {
	var fe fieldErrors
	checkID(&fe, s.ID, "give the job a unique id such as llama-ft-0427")
	checkTeam(&fe, s.Team)
	if s.Priority < 0 || s.Priority > MaxPriority {
		fe.add("priority", fmt.Sprintf("%d is out of range", s.Priority), "use an integer from 0 (lowest) to 100 (highest)")
	}
	if !s.Tier.valid() {
		fe.add("tier", fmt.Sprintf("%q is not a tier", clip(string(s.Tier))), "use one of critical, deadline, flexible")
	}
	switch {
	case s.Tier == TierDeadline && s.Deadline == nil:
		fe.add("deadline", "is required for tier deadline", fmt.Sprintf("give an RFC 3339 time such as %s (three days from now), or use tier flexible", exampleDeadline(now)))
	case s.Deadline != nil && !s.Deadline.After(now):
		fe.add("deadline", fmt.Sprintf("%s is not in the future", s.Deadline.Format(time.RFC3339)), fmt.Sprintf("give a time after now, such as %s (three days from now)", exampleDeadline(now)))
	case s.Deadline != nil && s.Deadline.Sub(now) > MaxDeadlineAhead:
		fe.add("deadline", fmt.Sprintf("%s is more than ten years ahead", s.Deadline.Format(time.RFC3339)), "give a deadline within ten years, or use tier flexible")
	case s.Deadline != nil && s.Work > 0 && s.Deadline.Sub(now) < s.Work.D():
		fe.add("deadline", fmt.Sprintf("leaves %s, less than the %s of work", s.Deadline.Sub(now).Round(time.Second), s.Work), "move the deadline later or reduce work")
	}
	switch {
	case s.Work <= 0:
		fe.add("work", "must be a positive duration", "estimate the compute time on one instance, e.g. 48h")
	case s.Work.D() > MaxWork:
		fe.add("work", fmt.Sprintf("%s is more than a year", s.Work), "estimate the compute time on one instance, at most 8784h (366 days); split longer work into several jobs")
	}
	s.Resources.validate(&fe, "ask for 1 or more GPUs")
	s.validateCommand(&fe)
	s.validateEnv(&fe)
	s.validateWorkdir(&fe)
	s.validateCheckpoint(&fe)
	if !contains(MarketPolicies, s.Policy) {
		fe.add("policy", fmt.Sprintf("%q is not a market policy a run can follow", clip(s.Policy)), "use one of "+strings.Join(MarketPolicies, ", ")+", or leave it out for refuel")
	}
	switch {
	case s.BudgetUSD < 0:
		fe.add("budget_usd", "is negative", "give a budget in USD, or leave it out for none")
	case s.BudgetUSD > MaxBudgetUSD:
		fe.add("budget_usd", fmt.Sprintf("%g is above %g", s.BudgetUSD, float64(MaxBudgetUSD)), "give a budget of at most 10000000 USD, or leave it out for none")
	}
	if s.MaxRestarts != nil && (*s.MaxRestarts < 0 || *s.MaxRestarts > MaxRestarts) {
		fe.add("max_restarts", fmt.Sprintf("%d is outside 0..%d", *s.MaxRestarts, MaxRestarts), fmt.Sprintf("tolerate 0 to %d restarts, or leave it out for %d", MaxRestarts, DefaultMaxRestarts))
	}
	return fe.err("JobSpec", clip(s.ID))
}

func (s *JobSpec) validateCommand(fe *fieldErrors) {
	checkCommand(fe, s.Command, "name the program to run, or leave command out to run the demo trainer")
}

// checkCommand checks a command's argv; emptyFix says what to write
// when its program is empty.
func checkCommand(fe *fieldErrors, command []string, emptyFix string) {
	if len(command) > MaxCommandArgs {
		fe.add("command", fmt.Sprintf("has %d arguments", len(command)), fmt.Sprintf("pass at most %d; put long argument lists in a config file the command reads", MaxCommandArgs))
		return
	}
	total := 0
	for i, arg := range command {
		at := fmt.Sprintf("command[%d]", i)
		total += len(arg)
		switch {
		case i == 0 && strings.TrimSpace(arg) == "":
			fe.add(at, "is empty", emptyFix)
		case len(arg) > MaxCommandArgBytes:
			fe.add(at, fmt.Sprintf("is %d bytes long", len(arg)), fmt.Sprintf("keep each argument within %d bytes; put long values in a file the command reads", MaxCommandArgBytes))
		case strings.ContainsRune(arg, 0):
			fe.add(at, "contains a NUL byte", "remove it: no program can receive one in its arguments")
		}
	}
	if total > MaxCommandBytes {
		fe.add("command", fmt.Sprintf("is %d bytes long", total), fmt.Sprintf("keep the whole command within %d bytes; put long values in a file the command reads", MaxCommandBytes))
	}
}

func (s *JobSpec) validateEnv(fe *fieldErrors) { checkEnv(fe, s.Env, "the trainer") }

// checkEnv checks a spec's env; reader names what reads it ("the
// trainer") in the fixes.
func checkEnv(fe *fieldErrors, env map[string]string, reader string) {
	if len(env) > MaxEnvVars {
		fe.add("env", fmt.Sprintf("sets %d variables", len(env)), fmt.Sprintf("set at most %d; put the rest in a file %s reads", MaxEnvVars, reader))
		return
	}
	total := 0
	// In key order, so the errors read the same every time (a workflow
	// validates its input too).
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		at := "env." + k
		if len(k) > MaxEnvKeyLength || !envKeyPattern.MatchString(k) {
			at = fmt.Sprintf("env[%q]", clip(k))
		}
		total += len(k) + len(v)
		switch {
		case len(k) > MaxEnvKeyLength:
			fe.add(at, fmt.Sprintf("is a name of %d characters", len(k)), fmt.Sprintf("use a name of at most %d characters", MaxEnvKeyLength))
		case !envKeyPattern.MatchString(k):
			fe.add(at, fmt.Sprintf("%q is not an environment variable name", clip(k)), "use letters, digits and '_', not starting with a digit, e.g. WANDB_PROJECT")
		case strings.HasPrefix(k, ReservedEnvPrefix):
			fe.add(at, "is set by the node agent", "leave the REFUEL_ variables to refuel (see the trainer contract) and name yours otherwise")
		case len(v) > MaxEnvValueBytes:
			fe.add(at, fmt.Sprintf("has a value of %d bytes", len(v)), fmt.Sprintf("keep each value within %d bytes; put long values in a file %s reads", MaxEnvValueBytes, reader))
		case strings.ContainsRune(v, 0):
			fe.add(at, "has a NUL byte in its value", "remove it: no process can receive one in its environment")
		}
	}
	if total > MaxEnvBytes {
		fe.add("env", fmt.Sprintf("is %d bytes in all", total), fmt.Sprintf("keep names and values within %d bytes together; put the rest in a file %s reads", MaxEnvBytes, reader))
	}
}

// validateWorkdir accepts an absolute path, or a relative one that stays
// inside the attempt's scratch directory it is resolved against.
func (s *JobSpec) validateWorkdir(fe *fieldErrors) { checkWorkdir(fe, s.Workdir) }

// checkWorkdir checks a command's workdir, a JobSpec's or a ServiceSpec's.
func checkWorkdir(fe *fieldErrors, w string) {
	const fix = "give an absolute path such as /opt/train, or a path inside the attempt's scratch directory such as src"
	switch {
	case w == "":
	case len(w) > MaxWorkdirBytes:
		fe.add("workdir", fmt.Sprintf("is %d bytes long", len(w)), fmt.Sprintf("use a path of at most %d bytes", MaxWorkdirBytes))
	case strings.IndexFunc(w, unicode.IsControl) >= 0:
		fe.add("workdir", "contains a control character", fix)
	case strings.HasPrefix(w, "~"):
		fe.add("workdir", fmt.Sprintf("%q starts with ~, which nothing expands", clip(w)), "write the home directory out, e.g. /home/trainer/src")
	case !path.IsAbs(w) && (path.Clean(w) == ".." || strings.HasPrefix(path.Clean(w), "../")):
		fe.add("workdir", fmt.Sprintf("%q leaves the scratch directory it is relative to", clip(w)), fix)
	}
}

func (s *JobSpec) validateCheckpoint(fe *fieldErrors) {
	c := s.Checkpoint
	switch {
	case c.URL == "":
	case len(c.URL) > MaxCheckpointURL:
		fe.add("checkpoint.url", fmt.Sprintf("is %d characters long", len(c.URL)), fmt.Sprintf("use a URL of at most %d characters", MaxCheckpointURL))
	case strings.IndexFunc(c.URL, unicode.IsControl) >= 0:
		fe.add("checkpoint.url", "contains a control character", "use file:///path, s3://bucket/prefix, gs://bucket/prefix or mem://")
	default:
		u, err := url.Parse(c.URL)
		if err != nil || u.Scheme == "" {
			fe.add("checkpoint.url", fmt.Sprintf("%q is not a URL", clip(c.URL)), "use file:///path, s3://bucket/prefix, gs://bucket/prefix or mem://")
		} else if !contains(checkpointSchemes, u.Scheme) {
			fe.add("checkpoint.url", fmt.Sprintf("scheme %q is not supported", clip(u.Scheme)), "use file://, s3://, gs:// or mem://")
		}
	}
	if !c.AutoInterval() {
		d, err := parseDurationText(c.Interval)
		switch {
		case err != nil:
			fe.add("checkpoint.interval", fmt.Sprintf("%q is not a duration", clip(c.Interval)), "write a duration such as 10m, or auto")
		case d <= 0:
			fe.add("checkpoint.interval", "must be positive", "write a duration such as 10m, or auto")
		case d > MaxCheckpointInterval:
			fe.add("checkpoint.interval", fmt.Sprintf("%s is more than a week", d), "checkpoint at least weekly (168h), or write auto")
		}
	}
	switch {
	case c.MinInterval < 0 || c.MaxInterval < 0:
		fe.add("checkpoint.min_interval", "is negative", "give positive bounds such as 30s and 20m, or leave them out")
	case c.MaxInterval.D() > MaxCheckpointInterval:
		fe.add("checkpoint.max_interval", fmt.Sprintf("%s is more than a week", c.MaxInterval), "give a bound of at most 168h, or leave it out for 30m")
	case c.MinInterval > c.MaxInterval:
		fe.add("checkpoint.min_interval", fmt.Sprintf("%s is above max_interval %s", c.MinInterval, c.MaxInterval), "make min_interval at most max_interval")
	}
	if c.Keep < 0 || c.Keep > MaxCheckpointKeep {
		fe.add("checkpoint.keep", fmt.Sprintf("%d is outside 1..%d", c.Keep, MaxCheckpointKeep), fmt.Sprintf("keep 1 to %d checkpoints", MaxCheckpointKeep))
	}
}

// parseDurationText reads a duration written as text, within
// MaxDurationText characters.
func parseDurationText(s string) (time.Duration, error) {
	if len(s) > MaxDurationText {
		return 0, fmt.Errorf("longer than %d characters", MaxDurationText)
	}
	return time.ParseDuration(s)
}

func checkID(fe *fieldErrors, id, example string) {
	switch {
	case id == "":
		fe.add("id", "is required", example)
	case !idPattern.MatchString(id):
		fe.add("id", fmt.Sprintf("%q is not a valid id", clip(id)), idFix)
	}
}

func checkTeam(fe *fieldErrors, team string) {
	if team != "" && !teamPattern.MatchString(team) {
		fe.add("team", fmt.Sprintf("%q is not a valid team", clip(team)), teamFix)
	}
}

// checkNames checks a list of instance types, zones or providers.
func checkNames(fe *fieldErrors, field string, names []string, most int) {
	if len(names) > most {
		fe.add(field, fmt.Sprintf("lists %d", len(names)), fmt.Sprintf("list at most %d, or leave it out for any", most))
		return
	}
	seen := map[string]bool{}
	for i, n := range names {
		at := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case strings.TrimSpace(n) == "":
			fe.add(at, "is empty", "remove it or name one")
		case !namePattern.MatchString(n):
			fe.add(at, fmt.Sprintf("%q is not a valid name", clip(n)), nameFix)
		case seen[n]:
			fe.add(at, fmt.Sprintf("%q is listed twice", n), "list each once")
		}
		seen[n] = true
	}
}

func contains[T comparable](xs []T, x T) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// clip shortens a value quoted in an error, so a huge bad value does not
// make a huge error (which would be a huge workflow failure).
func clip(s string) string {
	const most = 64
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// validate checks resources the same way for jobs and services; gpuFix
// says how many GPUs to ask for in the spec's own terms.
func (r Resources) validate(fe *fieldErrors, gpuFix string) {
	switch {
	case r.GPUs < 0:
		fe.add("resources.gpus", fmt.Sprintf("%d is negative", r.GPUs), gpuFix)
	case r.GPUs > MaxGPUs:
		fe.add("resources.gpus", fmt.Sprintf("%d is more than an instance has", r.GPUs), fmt.Sprintf("ask for at most %d GPUs per instance, and for more nodes if one is not enough", MaxGPUs))
	}
	switch {
	case r.Nodes < 0:
		fe.add("resources.nodes", fmt.Sprintf("%d is negative", r.Nodes), "ask for 1 or more nodes, or leave it out for 1")
	case r.Nodes > MaxNodes:
		fe.add("resources.nodes", fmt.Sprintf("%d is above %d", r.Nodes, MaxNodes), fmt.Sprintf("ask for at most %d nodes at once", MaxNodes))
	}
	switch {
	case r.MinNodes < 0:
		fe.add("resources.min_nodes", fmt.Sprintf("%d is negative", r.MinNodes), "give the fewest nodes the job may train on, 1 to resources.nodes, or leave it out for a rigid gang")
	case r.MinNodes > r.NodeCount():
		fe.add("resources.min_nodes", fmt.Sprintf("%d is above resources.nodes (%d)", r.MinNodes, r.NodeCount()), fmt.Sprintf("give at most %d, or leave it out for a rigid gang", r.NodeCount()))
	}
	switch {
	case r.ShrinkAfter < 0:
		fe.add("resources.shrink_after", "is negative", fmt.Sprintf("give how long a lost node's replacement is waited for, such as 2m, or leave it out for %s", DefaultShrinkAfter))
	case r.ShrinkAfter.D() > MaxShrinkAfter:
		fe.add("resources.shrink_after", fmt.Sprintf("%s is above %s", r.ShrinkAfter.D(), MaxShrinkAfter), fmt.Sprintf("give at most %s", MaxShrinkAfter))
	}
	switch {
	case r.MaxPricePerHour < 0:
		fe.add("resources.max_price_per_hour", "is negative", "give a price in USD per instance-hour, or leave it out for no cap")
	case r.MaxPricePerHour > MaxPricePerHour:
		fe.add("resources.max_price_per_hour", fmt.Sprintf("%g is above %d", r.MaxPricePerHour, MaxPricePerHour), fmt.Sprintf("give a price of at most %d USD per instance-hour, or leave it out for no cap", MaxPricePerHour))
	}
	checkNames(fe, "resources.instance_types", r.InstanceTypes, MaxInstanceTypes)
	checkNames(fe, "resources.zones", r.Zones, MaxZones)
	checkNames(fe, "resources.providers", r.Providers, MaxProviders)
}

// exampleDeadline is a deadline a fix can show: three days after now, on
// the hour, so it is never in the past.
func exampleDeadline(now time.Time) string {
	return now.UTC().Add(72 * time.Hour).Truncate(time.Hour).Format(time.RFC3339)
}

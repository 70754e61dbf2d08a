package spec

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// idPattern keeps job ids usable as workflow ids, task queue names, blob
// prefixes and cloud tags alike.
var idPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?$`)

// checkpointSchemes are the blob URL schemes refuel opens.
var checkpointSchemes = []string{"file", "s3", "gs", "mem"}

// Validate checks a normalised spec and returns a *ValidationError listing
// every problem, or nil. now is the time the job is submitted, used to
// check that a deadline lies in the future.
func (s *JobSpec) Validate(now time.Time) error {
	var fe fieldErrors
	switch {
	case s.ID == "":
		fe.add("id", "is required", "give the job a unique id such as llama-ft-0427")
	case !idPattern.MatchString(s.ID):
		fe.add("id", fmt.Sprintf("%q is not a valid id", s.ID), "use 1-128 lower-case letters, digits, '.', '_' or '-', starting and ending with a letter or digit")
	}
	if s.Priority < 0 || s.Priority > MaxPriority {
		fe.add("priority", fmt.Sprintf("%d is out of range", s.Priority), "use an integer from 0 (lowest) to 100 (highest)")
	}
	if !s.Tier.valid() {
		fe.add("tier", fmt.Sprintf("%q is not a tier", s.Tier), "use one of critical, deadline, flexible")
	}
	switch {
	case s.Tier == TierDeadline && s.Deadline == nil:
		fe.add("deadline", "is required for tier deadline", "give an RFC 3339 time such as 2026-12-01T18:00:00Z, or use tier flexible")
	case s.Deadline != nil && !s.Deadline.After(now):
		fe.add("deadline", fmt.Sprintf("%s is not in the future", s.Deadline.Format(time.RFC3339)), "give a time after now")
	case s.Deadline != nil && s.Work > 0 && s.Deadline.Sub(now) < s.Work.D():
		fe.add("deadline", fmt.Sprintf("leaves %s, less than the %s of work", s.Deadline.Sub(now).Round(time.Second), s.Work), "move the deadline later or reduce work")
	}
	if s.Work <= 0 {
		fe.add("work", "must be a positive duration", "estimate the compute time on one instance, e.g. 48h")
	}
	s.Resources.validate(&fe, "ask for 1 or more GPUs")
	if len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "" {
		fe.add("command[0]", "is empty", "name the program to run, or leave command out to run the demo trainer")
	}
	s.validateCheckpoint(&fe)
	if !contains(MarketPolicies, s.Policy) {
		fe.add("policy", fmt.Sprintf("%q is not a market policy a run can follow", s.Policy), "use one of "+strings.Join(MarketPolicies, ", ")+", or leave it out for refuel")
	}
	if s.BudgetUSD < 0 {
		fe.add("budget_usd", "is negative", "give a budget in USD, or leave it out for none")
	}
	if s.MaxRestarts != nil && *s.MaxRestarts < 0 {
		fe.add("max_restarts", fmt.Sprintf("%d is negative", *s.MaxRestarts), "tolerate 0 or more restarts, or leave it out for 3")
	}
	return fe.err("JobSpec", s.ID)
}

func (s *JobSpec) validateCheckpoint(fe *fieldErrors) {
	c := s.Checkpoint
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || u.Scheme == "" {
			fe.add("checkpoint.url", fmt.Sprintf("%q is not a URL", c.URL), "use file:///path, s3://bucket/prefix, gs://bucket/prefix or mem://")
		} else if !contains(checkpointSchemes, u.Scheme) {
			fe.add("checkpoint.url", fmt.Sprintf("scheme %q is not supported", u.Scheme), "use file://, s3://, gs:// or mem://")
		}
	}
	if !c.AutoInterval() {
		d, err := time.ParseDuration(c.Interval)
		switch {
		case err != nil:
			fe.add("checkpoint.interval", fmt.Sprintf("%q is not a duration", c.Interval), "write a duration such as 10m, or auto")
		case d <= 0:
			fe.add("checkpoint.interval", "must be positive", "write a duration such as 10m, or auto")
		}
	}
	switch {
	case c.MinInterval < 0 || c.MaxInterval < 0:
		fe.add("checkpoint.min_interval", "is negative", "give positive bounds such as 30s and 20m, or leave them out")
	case c.MinInterval > c.MaxInterval:
		fe.add("checkpoint.min_interval", fmt.Sprintf("%s is above max_interval %s", c.MinInterval, c.MaxInterval), "make min_interval at most max_interval")
	}
	if c.Keep < 0 {
		fe.add("checkpoint.keep", fmt.Sprintf("%d is negative", c.Keep), "keep 1 or more checkpoints")
	}
}

func checkNames(fe *fieldErrors, field string, names []string) {
	seen := map[string]bool{}
	for i, n := range names {
		switch {
		case strings.TrimSpace(n) == "":
			fe.add(fmt.Sprintf("%s[%d]", field, i), "is empty", "remove it or name one")
		case seen[n]:
			fe.add(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%q is listed twice", n), "list each once")
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

// validate checks resources the same way for jobs and services; gpuFix
// says how many GPUs to ask for in the spec's own terms.
func (r Resources) validate(fe *fieldErrors, gpuFix string) {
	if r.GPUs < 0 {
		fe.add("resources.gpus", fmt.Sprintf("%d is negative", r.GPUs), gpuFix)
	}
	if r.Nodes < 0 {
		fe.add("resources.nodes", fmt.Sprintf("%d is negative", r.Nodes), "ask for 1 or more nodes, or leave it out for 1")
	}
	if r.MaxPricePerHour < 0 {
		fe.add("resources.max_price_per_hour", "is negative", "give a price in USD per instance-hour, or leave it out for no cap")
	}
	checkNames(fe, "resources.instance_types", r.InstanceTypes)
	checkNames(fe, "resources.zones", r.Zones)
	checkNames(fe, "resources.providers", r.Providers)
}

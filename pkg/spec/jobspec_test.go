package spec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestParseJobSpecAcceptsYAMLAndJSON(t *testing.T) {
	cases := map[string]string{
		"yaml": `
id: llama-ft-0427
team: nlp
tier: deadline
deadline: 2026-12-05T00:00:00Z
work: 48h
resources: {gpus: 1, instance_types: [p3.2xlarge], max_price_per_hour: 4}
checkpoint: {url: "file:///tmp/c", interval: 10m, keep: 2}
`,
		"json": `{"id":"llama-ft-0427","team":"nlp","tier":"deadline","deadline":"2026-12-05T00:00:00Z","work":"48h",
"resources":{"gpus":1,"instance_types":["p3.2xlarge"],"max_price_per_hour":4},
"checkpoint":{"url":"file:///tmp/c","interval":"10m","keep":2}}`,
	}
	deadline := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	want := JobSpec{
		ID: "llama-ft-0427", Team: "nlp", Priority: 0, Tier: TierDeadline, Deadline: &deadline, Work: Duration(48 * time.Hour),
		Resources: Resources{GPUs: 1, InstanceTypes: []string{"p3.2xlarge"}, MaxPricePerHour: 4},
		Checkpoint: Checkpoint{URL: "file:///tmp/c", Interval: "10m", Keep: 2,
			MinInterval: Duration(DefaultMinCheckpointInterval), MaxInterval: Duration(DefaultMaxCheckpointInterval)},
		Policy: "refuel",
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseJobSpec([]byte(doc), now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestParseJobSpecFillsDefaults(t *testing.T) {
	got, err := ParseJobSpec([]byte("id: a\nwork: 1h\n"), now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Tier != DefaultTier || got.Resources.GPUs != DefaultGPUs || !got.Checkpoint.AutoInterval() || got.Checkpoint.Keep != DefaultCheckpointKeep {
		t.Errorf("defaults not filled: %+v", got)
	}
}

func TestValidateNamesEveryBadField(t *testing.T) {
	past := now.Add(-time.Hour)
	soon := now.Add(time.Hour)
	cases := map[string]struct {
		edit   func(*JobSpec)
		fields []string
	}{
		"missing id":              {func(s *JobSpec) { s.ID = "" }, []string{"id"}},
		"id with spaces":          {func(s *JobSpec) { s.ID = "Bad ID" }, []string{"id"}},
		"priority too high":       {func(s *JobSpec) { s.Priority = 101 }, []string{"priority"}},
		"unknown tier":            {func(s *JobSpec) { s.Tier = "urgent" }, []string{"tier"}},
		"unknown policy":          {func(s *JobSpec) { s.Policy = "optimal" }, []string{"policy"}},
		"deadline tier without":   {func(s *JobSpec) { s.Tier = TierDeadline; s.Deadline = nil }, []string{"deadline"}},
		"deadline in the past":    {func(s *JobSpec) { s.Deadline = &past }, []string{"deadline"}},
		"deadline before work":    {func(s *JobSpec) { s.Deadline = &soon; s.Work = Duration(2 * time.Hour) }, []string{"deadline"}},
		"no work":                 {func(s *JobSpec) { s.Work = 0 }, []string{"work"}},
		"negative gpus":           {func(s *JobSpec) { s.Resources.GPUs = -1 }, []string{"resources.gpus"}},
		"duplicate zone":          {func(s *JobSpec) { s.Resources.Zones = []string{"a", "a"} }, []string{"resources.zones[1]"}},
		"bad checkpoint scheme":   {func(s *JobSpec) { s.Checkpoint.URL = "ftp://x" }, []string{"checkpoint.url"}},
		"bad checkpoint interval": {func(s *JobSpec) { s.Checkpoint.Interval = "often" }, []string{"checkpoint.interval"}},
		"checkpoint bounds crossed": {func(s *JobSpec) {
			s.Checkpoint.MinInterval, s.Checkpoint.MaxInterval = Duration(time.Hour), Duration(time.Minute)
		}, []string{"checkpoint.min_interval"}},
		"empty command": {func(s *JobSpec) { s.Command = []string{""} }, []string{"command[0]"}},
		"several at once": {func(s *JobSpec) { s.Priority = -1; s.Work = 0; s.Checkpoint.Keep = -2 },
			[]string{"priority", "work", "checkpoint.keep"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := JobSpec{ID: "ok", Tier: TierFlexible, Work: Duration(time.Hour), Priority: 10}
			s.Normalize()
			tc.edit(&s)
			err := s.Validate(now)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v; want *ValidationError", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
				if f.Fix == "" {
					t.Errorf("%s: no fix given", f.Field)
				}
			}
			if diff := cmp.Diff(got, tc.fields); diff != "" {
				t.Errorf("fields got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestParseJobSpecRejectsUnknownAndMistypedFields(t *testing.T) {
	cases := map[string]struct{ doc, mention string }{
		"typo":         {"id: a\nwork: 1h\nteem: x\n", "teem"},
		"wrong type":   {"id: a\nwork: 1h\npriority: high\n", "priority"},
		"bad duration": {"id: a\nwork: forever\n", "forever"},
		"bad deadline": {"id: a\nwork: 1h\ndeadline: tomorrow\n", "deadline"},
		"empty":        {"  \n", "empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseJobSpec([]byte(tc.doc), now)
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %v; want one mentioning %q", err, tc.mention)
			}
		})
	}
}

// An unknown field is a field error naming it, like any other.
func TestUnknownFieldIsAFieldError(t *testing.T) {
	_, err := ParseJobSpec([]byte("id: a\nwork: 1h\nteem: x\n"), now)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "teem" {
		t.Errorf("error %v; want a field error on teem", err)
	}
}

// An elastic gang's fields parse from YAML, and their defaults make a
// rigid gang that waits DefaultShrinkAfter.
func TestElasticGangFields(t *testing.T) {
	cases := map[string]struct {
		yaml    string
		min     int
		elastic bool
		bound   time.Duration
	}{
		"rigid by default": {"nodes: 3", 3, false, DefaultShrinkAfter},
		"elastic":          {"nodes: 3\n  min_nodes: 2\n  shrink_after: 30s", 2, true, 30 * time.Second},
		"min equal nodes":  {"nodes: 2\n  min_nodes: 2", 2, false, DefaultShrinkAfter},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js, err := ParseJobSpec([]byte("id: g\nteam: t\nwork: 1h\nresources:\n  "+tc.yaml+"\n"), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			r := js.Resources
			if r.MinNodeCount() != tc.min || r.Elastic() != tc.elastic || r.ShrinkBound() != tc.bound {
				t.Errorf("min %d, elastic %v, bound %s; want %d, %v, %s", r.MinNodeCount(), r.Elastic(), r.ShrinkBound(), tc.min, tc.elastic, tc.bound)
			}
		})
	}
}

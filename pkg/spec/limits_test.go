package spec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func intp(n int) *int { return &n }

// Every limit of the README's table is a field error naming the field,
// with a fix; a value at the limit passes.
func TestJobSpecLimits(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tooLate := now.Add(MaxDeadlineAhead + time.Hour)
	cases := map[string]struct {
		edit   func(*JobSpec)
		fields []string // nil: valid
	}{
		"id at its limit":          {func(s *JobSpec) { s.ID = long(MaxIDLength) }, nil},
		"id too long":              {func(s *JobSpec) { s.ID = long(MaxIDLength + 1) }, []string{"id"}},
		"team at its limit":        {func(s *JobSpec) { s.Team = "ML Platform/" + long(MaxTeamLength-13) + "x" }, nil},
		"team of 100 KB":           {func(s *JobSpec) { s.Team = long(100 << 10) }, []string{"team"}},
		"team with a newline":      {func(s *JobSpec) { s.Team = "nlp\nops" }, []string{"team"}},
		"work over a year":         {func(s *JobSpec) { s.Work = Duration(MaxWork + time.Hour) }, []string{"work"}},
		"deadline past ten years":  {func(s *JobSpec) { s.Tier, s.Deadline = TierDeadline, &tooLate }, []string{"deadline"}},
		"gpus":                     {func(s *JobSpec) { s.Resources.GPUs = MaxGPUs + 1 }, []string{"resources.gpus"}},
		"nodes at their limit":     {func(s *JobSpec) { s.Resources.Nodes = MaxNodes }, nil},
		"nodes":                    {func(s *JobSpec) { s.Resources.Nodes = MaxNodes + 1 }, []string{"resources.nodes"}},
		"negative nodes":           {func(s *JobSpec) { s.Resources.Nodes = -1 }, []string{"resources.nodes"}},
		"min nodes above nodes":    {func(s *JobSpec) { s.Resources.Nodes, s.Resources.MinNodes = 2, 3 }, []string{"resources.min_nodes"}},
		"negative min nodes":       {func(s *JobSpec) { s.Resources.Nodes, s.Resources.MinNodes = 2, -1 }, []string{"resources.min_nodes"}},
		"negative shrink after":    {func(s *JobSpec) { s.Resources.ShrinkAfter = -1 }, []string{"resources.shrink_after"}},
		"shrink after":             {func(s *JobSpec) { s.Resources.ShrinkAfter = Duration(MaxShrinkAfter + 1) }, []string{"resources.shrink_after"}},
		"price":                    {func(s *JobSpec) { s.Resources.MaxPricePerHour = MaxPricePerHour + 1 }, []string{"resources.max_price_per_hour"}},
		"too many zones":           {func(s *JobSpec) { s.Resources.Zones = make([]string, MaxZones+1) }, []string{"resources.zones"}},
		"zone name too long":       {func(s *JobSpec) { s.Resources.Zones = []string{long(MaxNameLength + 1)} }, []string{"resources.zones[0]"}},
		"instance type with space": {func(s *JobSpec) { s.Resources.InstanceTypes = []string{"p3 2xlarge"} }, []string{"resources.instance_types[0]"}},
		"too many providers":       {func(s *JobSpec) { s.Resources.Providers = make([]string, MaxProviders+1) }, []string{"resources.providers"}},
		"too many args":            {func(s *JobSpec) { s.Command = make([]string, MaxCommandArgs+1) }, []string{"command"}},
		"arg too long":             {func(s *JobSpec) { s.Command = []string{"python", long(MaxCommandArgBytes + 1)} }, []string{"command[1]"}},
		"arg with NUL":             {func(s *JobSpec) { s.Command = []string{"python", "a\x00b"} }, []string{"command[1]"}},
		"command too long": {func(s *JobSpec) {
			s.Command = []string{"python"}
			for range MaxCommandBytes / MaxCommandArgBytes {
				s.Command = append(s.Command, long(MaxCommandArgBytes))
			}
		}, []string{"command"}},
		"env":                   {func(s *JobSpec) { s.Env = map[string]string{"WANDB_PROJECT": "x", "_X1": ""} }, nil},
		"env sets REFUEL_":      {func(s *JobSpec) { s.Env = map[string]string{"REFUEL_JOB_ID": "other"} }, []string{"env.REFUEL_JOB_ID"}},
		"env name":              {func(s *JobSpec) { s.Env = map[string]string{"1X": "", "A-B": ""} }, []string{`env["1X"]`, `env["A-B"]`}},
		"env name too long":     {func(s *JobSpec) { s.Env = map[string]string{long(MaxEnvKeyLength + 1): ""} }, []string{`env["` + long(64) + `…"]`}},
		"env value too long":    {func(s *JobSpec) { s.Env = map[string]string{"X": long(MaxEnvValueBytes + 1)} }, []string{"env.X"}},
		"env value with NUL":    {func(s *JobSpec) { s.Env = map[string]string{"X": "\x00"} }, []string{"env.X"}},
		"too many env":          {func(s *JobSpec) { s.Env = manyEnv(MaxEnvVars + 1) }, []string{"env"}},
		"workdir absolute":      {func(s *JobSpec) { s.Workdir = "/opt/train" }, nil},
		"workdir relative":      {func(s *JobSpec) { s.Workdir = "src/./models" }, nil},
		"workdir escapes":       {func(s *JobSpec) { s.Workdir = "src/../../etc" }, []string{"workdir"}},
		"workdir home":          {func(s *JobSpec) { s.Workdir = "~/src" }, []string{"workdir"}},
		"workdir control":       {func(s *JobSpec) { s.Workdir = "/opt/\ttrain" }, []string{"workdir"}},
		"workdir too long":      {func(s *JobSpec) { s.Workdir = "/" + long(MaxWorkdirBytes) }, []string{"workdir"}},
		"max_restarts 0":        {func(s *JobSpec) { s.MaxRestarts = intp(0) }, nil},
		"max_restarts too many": {func(s *JobSpec) { s.MaxRestarts = intp(MaxRestarts + 1) }, []string{"max_restarts"}},
		"max_restarts negative": {func(s *JobSpec) { s.MaxRestarts = intp(-1) }, []string{"max_restarts"}},
		"checkpoint url":        {func(s *JobSpec) { s.Checkpoint.URL = "s3://b/" + long(MaxCheckpointURL) }, []string{"checkpoint.url"}},
		"checkpoint interval":   {func(s *JobSpec) { s.Checkpoint.Interval = "169h" }, []string{"checkpoint.interval"}},
		"checkpoint max":        {func(s *JobSpec) { s.Checkpoint.MaxInterval = Duration(MaxCheckpointInterval + 1) }, []string{"checkpoint.max_interval"}},
		"checkpoint keep":       {func(s *JobSpec) { s.Checkpoint.Keep = MaxCheckpointKeep + 1 }, []string{"checkpoint.keep"}},
		"budget":                {func(s *JobSpec) { s.BudgetUSD = MaxBudgetUSD * 2 }, []string{"budget_usd"}},
		"restart from scratch":  {func(s *JobSpec) { s.Checkpoint.RestartFromScratch = true }, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := JobSpec{ID: "ok", Tier: TierFlexible, Work: Duration(time.Hour), Priority: 10}
			s.Normalize()
			tc.edit(&s)
			assertFields(t, s.Validate(now), tc.fields)
		})
	}
}

func manyEnv(n int) map[string]string {
	env := map[string]string{}
	for i := range n {
		env[strings.Repeat("X", i+1)] = ""
	}
	return env
}

func TestServiceSpecLimits(t *testing.T) {
	cases := map[string]struct {
		edit   func(*ServiceSpec)
		fields []string
	}{
		"max_replicas at its limit": {func(s *ServiceSpec) { s.MaxReplicas = MaxReplicas }, nil},
		"max_replicas":              {func(s *ServiceSpec) { s.MaxReplicas = MaxReplicas + 1 }, []string{"max_replicas"}},
		"team":                      {func(s *ServiceSpec) { s.Team = strings.Repeat("t", MaxTeamLength+1) }, []string{"team"}},
		"qps":                       {func(s *ServiceSpec) { s.Target.QPS = 2e6 }, []string{"target.qps"}},
		"upscale delay":             {func(s *ServiceSpec) { s.UpscaleDelay = Duration(25 * time.Hour) }, []string{"upscale_delay"}},
		"lead time":                 {func(s *ServiceSpec) { s.LeadTime = "25h" }, []string{"lead_time"}},
		"lead time text":            {func(s *ServiceSpec) { s.LeadTime = strings.Repeat("1", 40) + "s" }, []string{"lead_time"}},
		"model load":                {func(s *ServiceSpec) { s.ModelLoad = Duration(25 * time.Hour) }, []string{"model_load"}},
		"too many windows": {func(s *ServiceSpec) {
			s.Schedules = make([]ScalingWindow, MaxSchedules+1)
		}, []string{"schedules"}},
		"long cron": {func(s *ServiceSpec) {
			s.Schedules = []ScalingWindow{{Cron: strings.Repeat("*", MaxCronLength+1), Duration: Duration(time.Hour)}}
		}, []string{"schedules[0].cron"}},
		"long window": {func(s *ServiceSpec) {
			s.Schedules = []ScalingWindow{{Cron: "@daily", Duration: Duration(MaxWindow + time.Hour)}}
		}, []string{"schedules[0].duration"}},
		"gang replica": {func(s *ServiceSpec) { s.Resources.Nodes = 2 }, []string{"resources.nodes"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := ServiceSpec{ID: "svc", MinReplicas: 1, MaxReplicas: 4, Target: ScalingTarget{QPS: 1}}
			s.Normalize()
			tc.edit(&s)
			assertFields(t, s.Validate(), tc.fields)
		})
	}
}

func assertFields(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("Validate = %v; want valid", err)
		}
		return
	}
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
		if len(f.Error()) > 1024 {
			t.Errorf("%s: an error of %d bytes; a bad value must be clipped", f.Field, len(f.Error()))
		}
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("fields got(-), want(+):\n%s", diff)
	}
}

package spec

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseServiceSpecAcceptsYAMLAndJSON(t *testing.T) {
	cases := map[string]string{
		"yaml": `
id: chat-13b
team: assistant
priority: 80
min_replicas: 2
max_replicas: 40
target: {qps: 2.5, gpu_utilization: 0.8}
upscale_delay: 30s
downscale_delay: 15m
schedules:
  - {cron: "0 8 * * 1-5", duration: 10h, min_replicas: 8}
lead_time: 4m
warm_pool: 2
model_load: 90s
placement: on-demand
resources: {gpus: 1, instance_types: [g5.xlarge]}
`,
		"json": `{"id":"chat-13b","team":"assistant","priority":80,"min_replicas":2,"max_replicas":40,
"target":{"qps":2.5,"gpu_utilization":0.8},"upscale_delay":"30s","downscale_delay":"15m",
"schedules":[{"cron":"0 8 * * 1-5","duration":"10h","min_replicas":8}],"lead_time":"4m","warm_pool":2,"model_load":"90s",
"placement":"on-demand","resources":{"gpus":1,"instance_types":["g5.xlarge"]}}`,
	}
	want := ServiceSpec{
		ID: "chat-13b", Team: "assistant", Priority: 80, MinReplicas: 2, MaxReplicas: 40,
		Target:       ScalingTarget{QPS: 2.5, GPUUtilization: 0.8},
		Tolerance:    DefaultTolerance,
		UpscaleDelay: Duration(30 * time.Second), DownscaleDelay: Duration(15 * time.Minute),
		Schedules: []ScalingWindow{{Cron: "0 8 * * 1-5", Duration: Duration(10 * time.Hour), MinReplicas: 8}},
		LeadTime:  "4m", WarmPool: 2, ModelLoad: Duration(90 * time.Second), Placement: PlacementOnDemand,
		Resources: Resources{GPUs: 1, InstanceTypes: []string{"g5.xlarge"}},
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseServiceSpec([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestParseServiceSpecFillsDefaults(t *testing.T) {
	got, err := ParseServiceSpec([]byte("id: s\nmin_replicas: 1\nmax_replicas: 3\ntarget: {gpu_utilization: 0.7}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Tolerance != DefaultTolerance || got.DownscaleDelay.D() != DefaultDownscaleDelay || !got.AutoLeadTime() ||
		got.Placement != DefaultPlacement || got.Resources.GPUs != DefaultGPUs || got.UpscaleDelay != 0 {
		t.Errorf("defaults not filled: %+v", got)
	}
	if _, ok := got.FixedLeadTime(); ok {
		t.Error("FixedLeadTime ok for auto")
	}
}

func TestServiceSpecValidateNamesEveryBadField(t *testing.T) {
	cases := map[string]struct {
		edit   func(*ServiceSpec)
		fields []string
	}{
		"missing id":             {func(s *ServiceSpec) { s.ID = "" }, []string{"id"}},
		"bad id":                 {func(s *ServiceSpec) { s.ID = "Chat Bot" }, []string{"id"}},
		"priority":               {func(s *ServiceSpec) { s.Priority = 101 }, []string{"priority"}},
		"negative min":           {func(s *ServiceSpec) { s.MinReplicas = -1 }, []string{"min_replicas"}},
		"no max":                 {func(s *ServiceSpec) { s.MaxReplicas = 0 }, []string{"max_replicas"}},
		"max below min":          {func(s *ServiceSpec) { s.MinReplicas = 5; s.MaxReplicas = 4 }, []string{"max_replicas"}},
		"no target":              {func(s *ServiceSpec) { s.Target = ScalingTarget{} }, []string{"target"}},
		"utilisation as percent": {func(s *ServiceSpec) { s.Target.GPUUtilization = 80 }, []string{"target.gpu_utilization"}},
		"negative qps":           {func(s *ServiceSpec) { s.Target.QPS = -1 }, []string{"target.qps"}},
		"negative queue":         {func(s *ServiceSpec) { s.Target.QueueLength = -2 }, []string{"target.queue_length"}},
		"zero min, util only": {func(s *ServiceSpec) { s.MinReplicas = 0; s.Target = ScalingTarget{GPUUtilization: 0.8} },
			[]string{"target"}},
		"tolerance":       {func(s *ServiceSpec) { s.Tolerance = 1.5 }, []string{"tolerance"}},
		"upscale delay":   {func(s *ServiceSpec) { s.UpscaleDelay = Duration(-time.Second) }, []string{"upscale_delay"}},
		"downscale delay": {func(s *ServiceSpec) { s.DownscaleDelay = Duration(-time.Second) }, []string{"downscale_delay"}},
		"bad cron":        {func(s *ServiceSpec) { s.Schedules[0].Cron = "at nine" }, []string{"schedules[0].cron"}},
		"six-field cron":  {func(s *ServiceSpec) { s.Schedules[0].Cron = "0 0 8 * * 1-5" }, []string{"schedules[0].cron"}},
		"window duration": {func(s *ServiceSpec) { s.Schedules[0].Duration = 0 }, []string{"schedules[0].duration"}},
		"window floor":    {func(s *ServiceSpec) { s.Schedules[0].MinReplicas = 11 }, []string{"schedules[0].min_replicas"}},
		"lead time":       {func(s *ServiceSpec) { s.LeadTime = "soon" }, []string{"lead_time"}},
		"model load":      {func(s *ServiceSpec) { s.ModelLoad = Duration(-time.Second) }, []string{"model_load"}},
		"warm pool":       {func(s *ServiceSpec) { s.WarmPool = 11 }, []string{"warm_pool"}},
		"placement":       {func(s *ServiceSpec) { s.Placement = "spot" }, []string{"placement"}},
		"gpus":            {func(s *ServiceSpec) { s.Resources.GPUs = -1 }, []string{"resources.gpus"}},
		"duplicate zone":  {func(s *ServiceSpec) { s.Resources.Zones = []string{"a", "a"} }, []string{"resources.zones[1]"}},
		"several": {func(s *ServiceSpec) { s.Priority = -1; s.WarmPool = -1; s.Schedules[0].Duration = 0 },
			[]string{"priority", "schedules[0].duration", "warm_pool"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := ServiceSpec{ID: "ok", MinReplicas: 1, MaxReplicas: 10, Target: ScalingTarget{QPS: 2},
				Schedules: []ScalingWindow{{Cron: "0 8 * * 1-5", Duration: Duration(time.Hour), MinReplicas: 4}}}
			s.Normalize()
			tc.edit(&s)
			var ve *ValidationError
			if err := s.Validate(); !errors.As(err, &ve) {
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

func TestParseServiceSpecRejectsUnknownAndMistypedFields(t *testing.T) {
	cases := map[string]struct{ doc, mention string }{
		"typo":         {"id: s\nmax_replicas: 2\ntarget: {qps: 1}\nmax_replica: 3\n", "max_replica"},
		"wrong type":   {"id: s\nmax_replicas: many\ntarget: {qps: 1}\n", "max_replicas"},
		"bad duration": {"id: s\nmax_replicas: 2\ntarget: {qps: 1}\nupscale_delay: later\n", "later"},
		"empty":        {"\n", "empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseServiceSpec([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %v; want one mentioning %q", err, tc.mention)
			}
		})
	}
}

func TestPlacementTier(t *testing.T) {
	if PlacementSpotFirst.Tier() != TierDeadline || PlacementOnDemand.Tier() != TierCritical {
		t.Error("spot-first must allow spot and on-demand; on-demand must allow on-demand only")
	}
}

// The example service in examples/ is valid as shipped.
func TestExampleServiceSpec(t *testing.T) {
	s, err := ReadServiceSpec(filepath.Join("..", "..", "examples", "service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != "chat-13b" || len(s.Schedules) != 1 || s.ModelLoad.D() != 20*time.Second {
		t.Errorf("example service read as %+v", s)
	}
}

// A service with a command gets the serving defaults; one without keeps
// none of them and is capacity-only.
func TestParseServiceSpecServingDefaults(t *testing.T) {
	got, err := ParseServiceSpec([]byte("id: s\nmax_replicas: 3\ntarget: {concurrency: 4}\ncommand: [server]\nreadiness: {path: /ready}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Readiness{Path: "/ready", InitialDelay: Duration(DefaultInitialDelay), Period: Duration(DefaultReadinessPeriod), Timeout: Duration(DefaultReadinessTimeout)}
	if diff := cmp.Diff(*got.Readiness, want); diff != "" {
		t.Errorf("readiness got(-), want(+):\n%s", diff)
	}
	if !got.Serves() || got.QueueTimeout.D() != DefaultQueueTimeout || got.DrainTimeout.D() != DefaultDrainTimeout || got.SLO.Latency.D() != DefaultSLOLatency || got.MaxConcurrency != DefaultMaxConcurrency {
		t.Errorf("serving defaults not filled: %+v", got)
	}
	if by := got.Readiness.ReadyBy(); by != DefaultInitialDelay+DefaultReadinessPeriod+DefaultReadinessTimeout {
		t.Errorf("ReadyBy %s", by)
	}
	plain, err := ParseServiceSpec([]byte("id: s\nmax_replicas: 3\ntarget: {qps: 4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Serves() || plain.Readiness != nil || plain.SLO != nil || plain.QueueTimeout != 0 || plain.MaxConcurrency != 0 {
		t.Errorf("a capacity-only spec got serving fields: %+v", plain)
	}
}

func TestServiceSpecValidateNamesBadServingFields(t *testing.T) {
	cases := map[string]struct {
		edit   func(*ServiceSpec)
		fields []string
	}{
		"empty program":       {func(s *ServiceSpec) { s.Command = []string{" "} }, []string{"command[0]"}},
		"reserved env":        {func(s *ServiceSpec) { s.Env = map[string]string{"REFUEL_PORT": "1"} }, []string{"env.REFUEL_PORT"}},
		"workdir escapes":     {func(s *ServiceSpec) { s.Workdir = "../x" }, []string{"workdir"}},
		"model load timed":    {func(s *ServiceSpec) { s.ModelLoad = Duration(time.Second) }, []string{"model_load"}},
		"relative path":       {func(s *ServiceSpec) { s.Readiness.Path = "healthz" }, []string{"readiness.path"}},
		"space in path":       {func(s *ServiceSpec) { s.Readiness.Path = "/a b" }, []string{"readiness.path"}},
		"initial delay":       {func(s *ServiceSpec) { s.Readiness.InitialDelay = Duration(3 * time.Hour) }, []string{"readiness.initial_delay"}},
		"period too short":    {func(s *ServiceSpec) { s.Readiness.Period = Duration(time.Millisecond) }, []string{"readiness.period", "readiness.timeout"}},
		"timeout over period": {func(s *ServiceSpec) { s.Readiness.Timeout = Duration(5 * time.Second) }, []string{"readiness.timeout"}},
		"max concurrency":     {func(s *ServiceSpec) { s.MaxConcurrency = -1 }, []string{"max_concurrency"}},
		"queue timeout":       {func(s *ServiceSpec) { s.QueueTimeout = Duration(2 * time.Hour) }, []string{"queue_timeout"}},
		"drain timeout":       {func(s *ServiceSpec) { s.DrainTimeout = Duration(-time.Second) }, []string{"drain_timeout"}},
		"slo":                 {func(s *ServiceSpec) { s.SLO.Latency = Duration(-time.Second) }, []string{"slo.latency"}},
		"concurrency target":  {func(s *ServiceSpec) { s.Target.Concurrency = -1 }, []string{"target.concurrency"}},
		"serving without command": {func(s *ServiceSpec) { s.Command = nil; s.Target.Concurrency = 2 },
			[]string{"readiness", "max_concurrency", "queue_timeout", "drain_timeout", "slo", "target.concurrency"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := ServiceSpec{ID: "ok", MinReplicas: 1, MaxReplicas: 10, Target: ScalingTarget{QPS: 2}, Command: []string{"server"},
				Readiness: &Readiness{Period: Duration(2 * time.Second)}}
			s.Normalize()
			tc.edit(&s)
			var ve *ValidationError
			if err := s.Validate(); !errors.As(err, &ve) {
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

// The serving example beside the PyTorch trainer is valid as shipped.
func TestExampleServingSpec(t *testing.T) {
	s, err := ReadServiceSpec(filepath.Join("..", "..", "examples", "pytorch", "serve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Serves() || s.Readiness.Path != "/healthz" || s.Target.Concurrency != 4 {
		t.Errorf("serving example read as %+v", s)
	}
}

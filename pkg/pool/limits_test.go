package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

func TestPoolsFileLimits(t *testing.T) {
	cases := map[string]struct {
		edit   func(*Config)
		fields []string
	}{
		// A count is validated as a number: a billion machines must not be
		// listed one by one to find out there are too many.
		"a billion machines": {func(c *Config) { c.Base.Counts[0].Count = 1e9 }, []string{"base.counts[0].count"}},
		"too many in all": {func(c *Config) {
			c.Base.Counts = append(c.Base.Counts, BaseCount{InstanceType: "t", GPUs: 1, Count: MaxBaseMachines})
		}, []string{"base"}},
		"base provider":      {func(c *Config) { c.Base.Provider = "on prem" }, []string{"base.provider"}},
		"node zone":          {func(c *Config) { c.Base.Nodes[0].Zone = strings.Repeat("z", 65) }, []string{"base.nodes[0].zone"}},
		"node gpus":          {func(c *Config) { c.Base.Nodes[0].GPUs = spec.MaxGPUs + 1 }, []string{"base.nodes[0].gpus"}},
		"count price":        {func(c *Config) { c.Base.Counts[0].PricePerHour = spec.MaxPricePerHour + 1 }, []string{"base.counts[0].price_per_hour"}},
		"too many pools":     {func(c *Config) { c.Burst = make([]BurstPool, MaxBurstPools+1) }, []string{"burst"}},
		"too many offerings": {func(c *Config) { c.Burst[0].Offerings = make([]capacity.Offering, MaxOfferings+1) }, []string{"burst[0].offerings"}},
		"pool cap":           {func(c *Config) { c.Burst[0].MaxInstances = MaxInstances + 1 }, []string{"burst[0].max_instances"}},
		"offering type":      {func(c *Config) { c.Burst[0].Offerings[0].InstanceType = "g5 xlarge" }, []string{"burst[0].offerings[0].instance_type"}},
		"offering provider":  {func(c *Config) { c.Burst[0].Offerings[0].Provider = strings.Repeat("p", 100<<10) }, []string{"burst[0].offerings[0].provider"}},
		"offering price":     {func(c *Config) { c.Burst[0].Offerings[0].PricePerHour = 1e9 }, []string{"burst[0].offerings[0].price_per_hour"}},
		"aging":              {func(c *Config) { c.AgingPerHour = MaxAgingPerHour + 1 }, []string{"aging_per_hour"}},
		"preempt after":      {func(c *Config) { c.PreemptAfter = spec.Duration(MaxPreemptAfter + time.Hour) }, []string{"preempt_after"}},
		"at the limits":      {func(c *Config) { c.Base.Counts[0].Count = MaxBaseMachines - 1; c.Burst[0].MaxInstances = MaxInstances }, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := ParseConfig([]byte(example))
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(&c)
			err = c.Validate()
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("Validate = %v; want valid", err)
				}
				return
			}
			ve, ok := err.(*spec.ValidationError)
			if !ok {
				t.Fatalf("error %v; want *spec.ValidationError", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
				if f.Fix == "" {
					t.Errorf("%s: no fix given", f.Field)
				}
				if len(f.Error()) > 1024 {
					t.Errorf("%s: an error of %d bytes", f.Field, len(f.Error()))
				}
			}
			if diff := cmp.Diff(got, tc.fields); diff != "" {
				t.Errorf("fields got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestPoolsFileTooLarge(t *testing.T) {
	doc := "base: {name: b, counts: [{instance_type: t, gpus: 1, count: 1}]}\n#" + strings.Repeat("x", MaxDocumentBytes)
	_, err := ParseConfig([]byte(doc))
	if ve, ok := err.(*spec.ValidationError); !ok || !ve.Has("(document)") {
		t.Errorf("error %v; want the document refused for its size", err)
	}
}

package aws

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

func TestOfferings(t *testing.T) {
	earlier := fakeLaunchTime.Add(-time.Hour)
	market := func() *fakeEC2 {
		return &fakeEC2{
			Offered: map[string][]string{
				"p3.2xlarge":  {"us-east-1a", "us-east-1b", "us-east-1c"},
				"g5.xlarge":   {"us-east-1a"},
				"p3.16xlarge": {"us-east-1b"},
				"m5.large":    {"us-east-1a"}, // not in the catalogue
			},
			SpotPrices: []fakeSpotPrice{
				{"p3.2xlarge", "us-east-1a", "Linux/UNIX", "1.2000", earlier},
				{"p3.2xlarge", "us-east-1a", "Linux/UNIX", "0.9701", fakeLaunchTime}, // the latest wins
				{"p3.2xlarge", "us-east-1a", "Windows", "2.5000", fakeLaunchTime},
				{"p3.2xlarge", "us-east-1b", "Linux/UNIX", "0.9900", fakeLaunchTime},
				{"p3.2xlarge", "us-east-1c", "Linux/UNIX", "0.5000", fakeLaunchTime},
				{"g5.xlarge", "us-east-1a", "Linux/UNIX", "0.4000", fakeLaunchTime},
			},
			PageSize: 2,
		}
	}
	p3a, p3b := offer("p3.2xlarge", "us-east-1a", capacity.Spot, 0.9701), offer("p3.2xlarge", "us-east-1b", capacity.Spot, 0.99)
	g5a := offer("g5.xlarge", "us-east-1a", capacity.Spot, 0.40)
	odG5a := offer("g5.xlarge", "us-east-1a", capacity.OnDemand, 1.006)
	odP3b := offer("p3.2xlarge", "us-east-1b", capacity.OnDemand, 3.06)
	odBigB := offer("p3.16xlarge", "us-east-1b", capacity.OnDemand, 24.48)
	cases := map[string]struct {
		r       spec.Resources
		want    []capacity.Offering
		noCalls bool
	}{
		"one GPU, in the configured zones only": {
			r:    spec.Resources{GPUs: 1},
			want: []capacity.Offering{g5a, odG5a, p3a, odP3a, p3b, odP3b, odBigB},
		},
		"eight GPUs: no spot price, on-demand only": {r: spec.Resources{GPUs: 8}, want: []capacity.Offering{odBigB}},
		"the job's zones":                  {r: spec.Resources{GPUs: 1, Zones: []string{"us-east-1b"}}, want: []capacity.Offering{p3b, odP3b, odBigB}},
		"the job's instance types":         {r: spec.Resources{InstanceTypes: []string{"g5.xlarge"}}, want: []capacity.Offering{g5a, odG5a}},
		"price cap":                        {r: spec.Resources{GPUs: 1, MaxPricePerHour: 1}, want: []capacity.Offering{g5a, p3a, p3b}},
		"zone outside the configured ones": {r: spec.Resources{Zones: []string{"us-east-1c"}}, noCalls: true},
		"another provider":                 {r: spec.Resources{Providers: []string{"gcp"}}, noCalls: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := market()
			c := newTestCloud(t, f, func(cfg *Config) { cfg.Zones = []string{"us-east-1a", "us-east-1b"} })
			got, err := c.Offerings(context.Background(), tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("got(-), want(+):\n%s", diff)
			}
			if tc.noCalls && len(f.calls) > 0 {
				t.Errorf("%d EC2 calls for resources no offering can meet; want none", len(f.calls))
			}
		})
	}
}

func TestOfferingsRequest(t *testing.T) {
	f := &fakeEC2{Offered: map[string][]string{"p3.2xlarge": {"us-east-1a"}}}
	c := newTestCloud(t, f, func(cfg *Config) {
		cfg.Zones = []string{"us-east-1a", "us-east-1b"}
		cfg.InstanceTypes = []InstanceType{{Name: "p3.2xlarge", GPUs: 1, OnDemandPrice: 3.06}, {Name: "p3.8xlarge", GPUs: 4, OnDemandPrice: 12.24}}
	})
	if _, err := c.Offerings(context.Background(), spec.Resources{GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	type call struct {
		LocationType                      string
		Types, Zones, Products, SpotZones []string
		HasStartTime                      bool
	}
	var got []call
	for _, v := range f.callsOf("DescribeInstanceTypeOfferings") {
		fs := filters(v)
		got = append(got, call{LocationType: v.Get("LocationType"), Types: fs["instance-type"], Zones: fs["location"]})
	}
	for _, v := range f.callsOf("DescribeSpotPriceHistory") {
		got = append(got, call{
			Types: listed(v, "InstanceType"), Products: listed(v, "ProductDescription"),
			SpotZones: filters(v)["availability-zone"], HasStartTime: v.Get("StartTime") != "",
		})
	}
	want := []call{
		{LocationType: "availability-zone", Types: []string{"p3.2xlarge", "p3.8xlarge"}, Zones: []string{"us-east-1a", "us-east-1b"}},
		{Types: []string{"p3.2xlarge", "p3.8xlarge"}, Products: []string{"Linux/UNIX"}, SpotZones: []string{"us-east-1a", "us-east-1b"}, HasStartTime: true},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

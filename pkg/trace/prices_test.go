package trace

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const priceDoc = `{
  "SpotPriceHistory": [
    {"AvailabilityZone": "us-east-1a", "InstanceType": "p3.2xlarge", "ProductDescription": "Linux/UNIX", "SpotPrice": "0.600000", "Timestamp": "2023-02-15T06:00:00Z"},
    {"AvailabilityZone": "us-east-1a", "InstanceType": "p3.2xlarge", "ProductDescription": "Linux/UNIX", "SpotPrice": "0.500000", "Timestamp": "2023-02-15T00:00:00Z"},
    {"AvailabilityZone": "us-east-1a", "InstanceType": "p3.2xlarge", "ProductDescription": "Windows", "SpotPrice": "1.500000", "Timestamp": "2023-02-15T00:00:00Z"},
    {"AvailabilityZone": "us-west-2b", "InstanceType": "p3.2xlarge", "ProductDescription": "Linux/UNIX (Amazon VPC)", "SpotPrice": "0.900000", "Timestamp": "2023-02-15T03:00:00Z"}
  ],
  "OnDemandPrices": [
    {"Region": "us-west-2", "InstanceType": "p3.2xlarge", "PricePerHour": "3.06"},
    {"Region": "eu-west-1", "InstanceType": "p3.2xlarge", "PricePerHour": "3.305"}
  ]
}`

func TestParsePrices(t *testing.T) {
	p, err := ParsePrices("p.json", []byte(priceDoc))
	if err != nil {
		t.Fatal(err)
	}
	at := func(h int) time.Time { return time.Date(2023, 2, 15, h, 0, 0, 0, time.UTC) }
	want := []SpotPrice{
		{Zone: "us-east-1a", InstanceType: "p3.2xlarge", USD: 0.5, At: at(0)},
		{Zone: "us-east-1a", InstanceType: "p3.2xlarge", USD: 0.6, At: at(6)},
		{Zone: "us-west-2b", InstanceType: "p3.2xlarge", USD: 0.9, At: at(3)},
	}
	if diff := cmp.Diff(p.Spot, want); diff != "" {
		t.Errorf("spot prices got(-), want(+):\n%s", diff)
	}
	for name, c := range map[string]struct {
		at   time.Time
		want float64
	}{
		"before the first change, the first price": {at(0).Add(-time.Hour), 0.5},
		"between changes":                          {at(5), 0.5},
		"at a change":                              {at(6), 0.6},
		"after the last":                           {at(30), 0.6},
	} {
		if got, ok := p.SpotAt("us-east-1a", "p3.2xlarge", c.at); !ok || got != c.want {
			t.Errorf("%s: %v %v; want %v", name, got, ok, c.want)
		}
	}
	if _, ok := p.SpotAt("us-east-1b", "p3.2xlarge", at(1)); ok {
		t.Error("a price for a zone the file does not know")
	}
	if usd, ok := p.OnDemandIn("eu-west-1", "p3.2xlarge"); !ok || usd != 3.305 {
		t.Errorf("on-demand in eu-west-1: %v %v; want 3.305", usd, ok)
	}
	if got := p.Start(); !got.Equal(at(0)) {
		t.Errorf("start %s; want the earliest price's %s", got, at(0))
	}
}

func TestParsePricesNamesTheBadEntry(t *testing.T) {
	cases := map[string]string{
		"not JSON":       `{`,
		"unknown field":  `{"SpotPrices": []}`,
		"bad price":      `{"SpotPriceHistory": [{"AvailabilityZone": "a", "InstanceType": "t", "SpotPrice": "cheap", "Timestamp": "2023-02-15T00:00:00Z"}]}`,
		"bad time":       `{"SpotPriceHistory": [{"AvailabilityZone": "a", "InstanceType": "t", "SpotPrice": "1", "Timestamp": "yesterday"}]}`,
		"no zone":        `{"SpotPriceHistory": [{"InstanceType": "t", "SpotPrice": "1", "Timestamp": "2023-02-15T00:00:00Z"}]}`,
		"zero on-demand": `{"OnDemandPrices": [{"Region": "r", "InstanceType": "t", "PricePerHour": "0"}]}`,
		"nothing":        `{}`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePrices("p.json", []byte(doc))
			var e *Error
			if !errors.As(err, &e) || e.File != "p.json" {
				t.Errorf("error %v; want a *trace.Error naming p.json", err)
			}
		})
	}
}

func TestRegion(t *testing.T) {
	for zone, want := range map[string]string{
		"us-east-1a": "us-east-1", "eu-west-2c": "eu-west-2", "us-central1-a": "us-central1",
		"local": "local", "us-east-1": "us-east-1", "a": "a", "": "",
	} {
		if got := Region(zone); got != want {
			t.Errorf("region of %q: %q; want %q", zone, got, want)
		}
	}
	// The clouds name regions apart (EC2 us-east-1, Compute Engine
	// us-east1), so a move between clouds is always priced as a move
	// between regions: the checkpoint's egress and its transfer time.
	if aws, gce := Region("us-east-1b"), Region("us-east1-b"); aws == gce {
		t.Errorf("EC2's us-east-1b and Compute Engine's us-east1-b are both in %q; want regions apart", aws)
	}
}

func TestCloudOf(t *testing.T) {
	for zone, want := range map[string]string{
		"us-east-1a": "aws", "eu-west-2c": "aws", "ap-southeast-1b": "aws",
		"us-central1-a": "gce", "asia-south2-b": "gce", "us-east1-b": "gce",
		"dc-1": "", "local": "", "us-east-1": "", "us-central1": "", "": "",
	} {
		if got := CloudOf(zone); got != want {
			t.Errorf("cloud of %q: %q; want %q", zone, got, want)
		}
	}
}

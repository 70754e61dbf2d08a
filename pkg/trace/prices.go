package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Prices is what pools charge: each zone's spot price history per
// instance type, in the shape EC2's DescribeSpotPriceHistory answers
// (`aws ec2 describe-spot-price-history` output as is), and each region's
// on-demand price per instance type, which EC2 publishes apart, through
// its Price List API.
type Prices struct {
	// Name is the file the prices were read from.
	Name string
	// Spot is every spot price change, sorted by zone, instance type and
	// time.
	Spot []SpotPrice
	// OnDemand is sorted by region and instance type.
	OnDemand []OnDemandPrice
}

// SpotPrice is a zone's spot price of an instance type from At on.
type SpotPrice struct {
	Zone, InstanceType string
	USD                float64 // per instance-hour
	At                 time.Time
}

// OnDemandPrice is a region's on-demand price of an instance type.
type OnDemandPrice struct {
	Region, InstanceType string
	USD                  float64 // per instance-hour
}

// pricesFile is the JSON layout: DescribeSpotPriceHistory's, prices as
// strings, with the on-demand prices beside it.
type pricesFile struct {
	SpotPriceHistory []struct {
		AvailabilityZone   string
		InstanceType       string
		ProductDescription string
		SpotPrice          string
		Timestamp          string
	}
	OnDemandPrices []struct {
		Region       string
		InstanceType string
		PricePerHour string
	}
}

// LoadPrices reads a price file.
func LoadPrices(path string) (*Prices, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Problem: "cannot be read", Err: err}
	}
	return ParsePrices(path, b)
}

// ParsePrices reads prices from the bytes of the file named name. Only
// Linux/UNIX prices count (spot prices of other products are skipped);
// every other entry must be complete and positive.
func ParsePrices(name string, b []byte) (*Prices, error) {
	bad := func(problem string, err error) (*Prices, error) {
		return nil, &Error{File: name, Problem: problem, Err: err}
	}
	var f pricesFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return bad("is not a price file (DescribeSpotPriceHistory's JSON, with OnDemandPrices beside it)", err)
	}
	p := &Prices{Name: name}
	for i, e := range f.SpotPriceHistory {
		where := fmt.Sprintf("SpotPriceHistory[%d]", i)
		if e.ProductDescription != "" && !strings.HasPrefix(e.ProductDescription, "Linux/UNIX") {
			continue
		}
		usd, err := strconv.ParseFloat(e.SpotPrice, 64)
		if err != nil || !(usd > 0) {
			return bad(fmt.Sprintf("%s.SpotPrice is %q; give USD per hour such as \"0.918000\"", where, e.SpotPrice), nil)
		}
		at, err := time.Parse(time.RFC3339, e.Timestamp)
		if err != nil {
			return bad(fmt.Sprintf("%s.Timestamp is %q; give RFC 3339 such as 2023-02-15T00:00:00Z", where, e.Timestamp), nil)
		}
		if e.AvailabilityZone == "" || e.InstanceType == "" {
			return bad(where+" lacks its AvailabilityZone or InstanceType", nil)
		}
		p.Spot = append(p.Spot, SpotPrice{Zone: e.AvailabilityZone, InstanceType: e.InstanceType, USD: usd, At: at})
	}
	for i, e := range f.OnDemandPrices {
		where := fmt.Sprintf("OnDemandPrices[%d]", i)
		usd, err := strconv.ParseFloat(e.PricePerHour, 64)
		if err != nil || !(usd > 0) {
			return bad(fmt.Sprintf("%s.PricePerHour is %q; give USD per hour such as \"3.06\"", where, e.PricePerHour), nil)
		}
		if e.Region == "" || e.InstanceType == "" {
			return bad(where+" lacks its Region or InstanceType", nil)
		}
		p.OnDemand = append(p.OnDemand, OnDemandPrice{Region: e.Region, InstanceType: e.InstanceType, USD: usd})
	}
	if len(p.Spot) == 0 && len(p.OnDemand) == 0 {
		return bad("holds no Linux/UNIX price", nil)
	}
	slices.SortStableFunc(p.Spot, func(a, b SpotPrice) int {
		if c := strings.Compare(a.Zone, b.Zone); c != 0 {
			return c
		}
		if c := strings.Compare(a.InstanceType, b.InstanceType); c != 0 {
			return c
		}
		return a.At.Compare(b.At)
	})
	slices.SortStableFunc(p.OnDemand, func(a, b OnDemandPrice) int {
		if c := strings.Compare(a.Region, b.Region); c != 0 {
			return c
		}
		return strings.Compare(a.InstanceType, b.InstanceType)
	})
	return p, nil
}

// SpotAt is the zone's spot price of the instance type at t: the latest
// change at or before t, or the earliest known when t comes before it.
func (p *Prices) SpotAt(zone, instanceType string, t time.Time) (float64, bool) {
	var usd float64
	found := false
	for _, s := range p.Spot {
		if s.Zone != zone || s.InstanceType != instanceType {
			continue
		}
		if !found || !s.At.After(t) {
			usd, found = s.USD, true
		}
	}
	return usd, found
}

// SpotHistory is the zone's spot price changes of the instance type,
// oldest first.
func (p *Prices) SpotHistory(zone, instanceType string) []SpotPrice {
	var out []SpotPrice
	for _, s := range p.Spot {
		if s.Zone == zone && s.InstanceType == instanceType {
			out = append(out, s)
		}
	}
	return out
}

// OnDemandIn is the region's on-demand price of the instance type.
func (p *Prices) OnDemandIn(region, instanceType string) (float64, bool) {
	for _, o := range p.OnDemand {
		if o.Region == region && o.InstanceType == instanceType {
			return o.USD, true
		}
	}
	return 0, false
}

// Start is the time of the earliest spot price: a market replayed with
// these prices starts there.
func (p *Prices) Start() time.Time {
	var t time.Time
	for _, s := range p.Spot {
		if t.IsZero() || s.At.Before(t) {
			t = s.At
		}
	}
	return t
}

// Region is the region a zone name belongs to, as clouds name them: the
// zone less the letter after its number ("us-east-1a" is in "us-east-1",
// GCP's "us-central1-a" in "us-central1"). A name of another form is its
// own region.
func Region(zone string) string {
	n := len(zone)
	if n < 2 || zone[n-1] < 'a' || zone[n-1] > 'z' {
		return zone
	}
	switch prev := zone[n-2]; {
	case prev >= '0' && prev <= '9':
		return zone[:n-1]
	case prev == '-':
		return zone[:n-2]
	}
	return zone
}

// CloudOf is the cloud a zone name is of, by the form each cloud names its
// zones in: "aws" for EC2's region and letter ("us-east-1a"), "gce" for
// Compute Engine's region, dash and letter ("us-central1-a"), "" for a
// name of neither form, whose cloud the name does not say.
func CloudOf(zone string) string {
	region := Region(zone)
	if region == zone || !strings.Contains(region, "-") {
		return ""
	}
	if last := region[len(region)-1]; last < '0' || last > '9' {
		return ""
	}
	if strings.HasSuffix(zone[:len(zone)-1], "-") {
		return "gce"
	}
	return "aws"
}

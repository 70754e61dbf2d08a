package capacity

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/spec"
)

var (
	spotA = Offering{Provider: "p", InstanceType: "g1", Zone: "a", Market: Spot, GPUs: 1, PricePerHour: 1}
	spotB = Offering{Provider: "p", InstanceType: "g1", Zone: "b", Market: Spot, GPUs: 1, PricePerHour: 0.9}
	odA   = Offering{Provider: "p", InstanceType: "g1", Zone: "a", Market: OnDemand, GPUs: 1, PricePerHour: 3}
	big   = Offering{Provider: "q", InstanceType: "g8", Zone: "a", Market: Spot, GPUs: 8, PricePerHour: 7}
)

func keys(os []Offering) []string {
	out := []string{}
	for _, o := range os {
		out = append(out, o.Key())
	}
	return out
}

func TestOrder(t *testing.T) {
	all := []Offering{odA, spotA, spotB}
	cases := map[string]struct {
		tier  spec.Tier
		avoid string
		want  []Offering
	}{
		"deadline: spot cheapest first, then on-demand": {spec.TierDeadline, "", []Offering{spotB, spotA, odA}},
		"flexible: spot only":                           {spec.TierFlexible, "", []Offering{spotB, spotA}},
		"critical: on-demand only":                      {spec.TierCritical, "", []Offering{odA}},
		"preempted zone tried last within its market":   {spec.TierDeadline, "b", []Offering{spotA, spotB, odA}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(keys(Order(all, tc.tier, tc.avoid)), keys(tc.want)); diff != "" {
				t.Errorf("got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	all := []Offering{spotA, odA, big}
	cases := map[string]struct {
		r    spec.Resources
		want []Offering
	}{
		"any":        {spec.Resources{GPUs: 1}, all},
		"8 gpus":     {spec.Resources{GPUs: 8}, []Offering{big}},
		"price cap":  {spec.Resources{GPUs: 1, MaxPricePerHour: 2}, []Offering{spotA}},
		"provider":   {spec.Resources{Providers: []string{"q"}}, []Offering{big}},
		"zone, type": {spec.Resources{Zones: []string{"a"}, InstanceTypes: []string{"g1"}}, []Offering{spotA, odA}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(keys(Match(all, tc.r)), keys(tc.want)); diff != "" {
				t.Errorf("got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestClassifiedErrors(t *testing.T) {
	quota := NewError(Quota, spotA, "VcpuLimitExceeded", "limit 8")
	spec := NewError(SpecMismatch, odA, "Unsupported", "not in zone")
	stock := NewError(NoCapacity, spotB, "InsufficientInstanceCapacity", "none")
	cases := map[string]struct {
		err   error
		class Class
		n     int
	}{
		"single":             {quota, Quota, 1},
		"wrapped":            {fmt.Errorf("acquire: %w", stock), NoCapacity, 1},
		"all permanent":      {errors.Join(quota, spec), Quota, 2},
		"retryable wins":     {errors.Join(quota, stock), NoCapacity, 2},
		"unclassified error": {errors.New("boom"), Unknown, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ClassOf(tc.err); got != tc.class {
				t.Errorf("ClassOf = %s; want %s", got, tc.class)
			}
			if got := len(Failures(tc.err)); got != tc.n {
				t.Errorf("%d failures; want %d", got, tc.n)
			}
		})
	}
	if !IsNotFound(fmt.Errorf("release: %w", &NotFoundError{ID: "i-1"})) {
		t.Error("IsNotFound missed a wrapped NotFoundError")
	}
}

func TestUnavailableCacheExpires(t *testing.T) {
	now := time.Unix(0, 0)
	c := NewUnavailableCache(3*time.Minute, func() time.Time { return now })
	c.MarkUnavailable(spotA)
	if !c.IsUnavailable(spotA) || c.IsUnavailable(spotB) {
		t.Fatal("cache does not hold exactly the marked offering")
	}
	now = now.Add(3 * time.Minute)
	if c.IsUnavailable(spotA) {
		t.Error("entry outlived its TTL")
	}
}

func TestRemedies(t *testing.T) {
	cases := map[string]struct {
		classes                       []Class
		withinMinutes, hours, forever bool
	}{
		"no stock passes in minutes":        {[]Class{NoCapacity}, true, true, false},
		"price moves over hours":            {[]Class{Price}, false, true, false},
		"quota must be raised":              {[]Class{Quota}, false, false, true},
		"config must be fixed":              {[]Class{Config}, false, false, true},
		"one curable offering is enough":    {[]Class{SpecMismatch, Throttled}, true, true, false},
		"price and quota: hours, not never": {[]Class{Quota, Price}, false, true, false},
		"nothing failed is not permanent":   {nil, false, false, false},
		"a class this build does not know":  {[]Class{"brand-new"}, true, true, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := CuredWithin(Minutes, tc.classes...); got != tc.withinMinutes {
				t.Errorf("CuredWithin(Minutes) = %v, want %v", got, tc.withinMinutes)
			}
			if got := CuredWithin(Hours, tc.classes...); got != tc.hours {
				t.Errorf("CuredWithin(Hours) = %v, want %v", got, tc.hours)
			}
			if got := Permanent(tc.classes...); got != tc.forever {
				t.Errorf("Permanent = %v, want %v", got, tc.forever)
			}
		})
	}
}

func TestEveryClassHasARemedy(t *testing.T) {
	for _, c := range Classes {
		if _, ok := remedies[c]; !ok {
			t.Errorf("class %s has no entry in the remedies table", c)
		}
	}
}

func TestIdempotencyTokenComesFromTheRunsIdentity(t *testing.T) {
	long := strings.Repeat("x", 128) // the longest job id
	first := Request{RunID: long, Identity: "0197e1a2-7c3e-7b61-9d0f-52a4c8e9f001", Attempt: 3}
	later := Request{RunID: long, Identity: "0197e1a2-7c3e-7b61-9d0f-52a4c8e9f002", Attempt: 3}
	if first.IdempotencyToken() == later.IdempotencyToken() {
		t.Errorf("two runs with the same job id share token %s", first.IdempotencyToken())
	}
	if n := len(first.IdempotencyToken() + "-on-demand"); n > 64 {
		t.Errorf("token with its market is %d characters; EC2 takes 64", n)
	}
	if got := (Request{RunID: "job-1", Attempt: 2}).IdempotencyToken(); got != "job-1-2" {
		t.Errorf("a request without identity is keyed %q; want job-1-2 as before identities", got)
	}
}

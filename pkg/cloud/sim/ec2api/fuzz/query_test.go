// Package fuzz holds the fuzz test of the sim's EC2 endpoint apart from
// its other tests: those drive it with the AWS SDK's EC2 client, and a
// fuzz build instruments every package it links, the SDK's largest among
// them, which took minutes of a cold build.
package fuzz

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"refuel/pkg/cloud/sim"
	"refuel/pkg/cloud/sim/ec2api"
	"refuel/pkg/trace"
)

var (
	smallA = sim.Pool{Zone: "us-west-2a", InstanceType: "p3.2xlarge"}
	smallB = sim.Pool{Zone: "us-west-2b", InstanceType: "p3.2xlarge"}
	largeA = sim.Pool{Zone: "us-west-2a", InstanceType: "p3.16xlarge"}
)

func points(p ...int) *trace.Trace { return &trace.Trace{Gap: 10 * time.Minute, Points: p} }

// ec2Error is the body of an EC2 error, as clients read it.
type ec2Error struct {
	XMLName xml.Name `xml:"Response"`
	Errors  []struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Errors>Error"`
}

// FuzzQuery sends any form body to the endpoint: it never panics or
// hangs, and answers either a response of the action or an EC2 error
// with a code, as XML. The sim has quotas, so launches end. The seed
// corpus (testdata/fuzz/FuzzQuery) holds one request of each action.
func FuzzQuery(f *testing.F) {
	cloud, err := sim.New(sim.Config{
		Pools:  []sim.PoolConfig{{Pool: smallA, Spot: points(1, 0, 2)}, {Pool: smallB, Spot: points(0, 1)}, {Pool: largeA}},
		Quotas: sim.Quotas{SpotInstances: 4, OnDemandVCPUs: 256},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = cloud.Close() })
	h := ec2api.New(cloud, nil)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			var any struct{ XMLName xml.Name }
			if err := xml.Unmarshal(rec.Body.Bytes(), &any); err != nil || !strings.HasSuffix(any.XMLName.Local, "Response") {
				t.Fatalf("200 with a body that is no response: %v\n%s", err, rec.Body.String())
			}
			return
		}
		var e ec2Error
		if err := xml.Unmarshal(rec.Body.Bytes(), &e); err != nil || len(e.Errors) == 0 || e.Errors[0].Code == "" {
			t.Fatalf("HTTP %d with a body that is no EC2 error: %v\n%s", rec.Code, err, rec.Body.String())
		}
		if e.Errors[0].Code == "InternalError" {
			t.Fatalf("a request the sim could not classify: %s", e.Errors[0].Message)
		}
	})
}

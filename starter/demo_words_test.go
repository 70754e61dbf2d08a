package main

import "testing"

// The demo says where a run is by its offering: the cloud first.
func TestOfferingWordsNameTheCloud(t *testing.T) {
	for key, want := range map[string]string{
		"gce/a3-highgpu-1g/us-central1-a/spot": "gce spot a3-highgpu-1g in us-central1-a",
		"aws/p3.2xlarge/us-west-2a/on-demand":  "aws on-demand p3.2xlarge in us-west-2a",
		"base/p3.2xlarge/dc-1/base":            "base base p3.2xlarge in dc-1",
		"":                                     "spot",
		"not-a-key":                            "spot",
	} {
		if got := offeringWords(key, "spot"); got != want {
			t.Errorf("%q: %q; want %q", key, got, want)
		}
	}
}

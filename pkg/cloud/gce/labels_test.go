package gce

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
)

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("Run.", 20)
	tests := map[string]struct{ in, want string }{
		"kept":            {"train-gpt_2", "train-gpt_2"},
		"lowered":         {"Train-GPT", "train-gpt"},
		"others become -": {"jobs/a.b:c d", "jobs-a-b-c-d"},
		"empty stays":     {"", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := LabelValue(tc.in)
			if got != tc.want {
				t.Errorf("LabelValue(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if len(got) > 63 || strings.Trim(got, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
				t.Errorf("LabelValue(%q) = %q breaks GCE's label rules", tc.in, got)
			}
		})
	}
	if got := LabelValue(long); len(got) != 63 || !strings.HasPrefix(got, strings.Repeat("run-", 13)) {
		t.Errorf("a long value: %q, want its first 54 characters and a hash, 63 in all", got)
	}
	if a, b := LabelValue(long), LabelValue(long+"x"); a == b {
		t.Errorf("two long values share the label %q", a)
	}
}

func TestLabelsNameTheContractKeys(t *testing.T) {
	got := Labels(map[string]string{capacity.TagRun: "Job-1", capacity.TagPool: "gpu", capacity.TagDeployment: "prod"})
	want := map[string]string{LabelRun: "job-1", LabelPool: "gpu", LabelDeployment: "prod"}
	if d := cmp.Diff(got, want); d != "" {
		t.Errorf("labels: got(-), want(+):\n%s", d)
	}
}

func TestLabelFilterIsStable(t *testing.T) {
	f := labelFilter(map[string]string{capacity.TagRun: "Job/1", capacity.TagDeployment: "prod"})
	want := `(labels.refuel-deployment = "prod") AND (labels.refuel-run = "job-1")`
	if f != want {
		t.Errorf("filter %s, want %s", f, want)
	}
}

func TestGPUsOfMachineTypeNames(t *testing.T) {
	for name, want := range map[string]int{"a2-highgpu-1g": 1, "a3-highgpu-8g": 8, "zones/z/machineTypes/a2-megagpu-16g": 16,
		"g2-standard-4": 1, "g2-standard-24": 2, "g2-standard-48": 4, "g2-standard-96": 8, "n1-standard-8": 0} {
		if got := gpusOf(name); got != want {
			t.Errorf("gpusOf(%s) = %d, want %d", name, got, want)
		}
	}
}

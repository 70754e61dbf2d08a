package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A JobSpec from any client (the temporal CLI, another SDK) is decoded
// as strictly as starter's: each problem is a field error naming the
// field, all of them at once.
func TestDecodeJobSpecJSONNamesEveryField(t *testing.T) {
	cases := map[string]struct {
		doc    string
		fields []string
	}{
		"valid":              {`{"id":"a","work":"1h","resources":{"gpus":1},"env":{"X":"1"},"max_restarts":0}`, nil},
		"top-level typo":     {`{"id":"a","teem":"nlp"}`, []string{"teem"}},
		"nested typo":        {`{"id":"a","resources":{"gpu":1}}`, []string{"resources.gpu"}},
		"wrong case":         {`{"ID":"a","Work":"1h"}`, []string{"ID", "Work"}},
		"typo in checkpoint": {`{"id":"a","checkpoint":{"restart_from_scrach":true}}`, []string{"checkpoint.restart_from_scrach"}},
		"bad duration":       {`{"id":"a","work":"forever"}`, []string{"work"}},
		"huge seconds":       {`{"id":"a","work":1e300}`, []string{"work"}},
		"bad deadline":       {`{"id":"a","deadline":"tomorrow"}`, []string{"deadline"}},
		"mistyped":           {`{"id":7,"priority":"high","command":"python train.py","env":{"X":1}}`, []string{"command", "env.X", "id", "priority"}},
		"out of range":       {`{"id":"a","priority":1e30}`, []string{"priority"}},
		"not an object":      {`[1,2]`, []string{"(document)"}},
		"object expected":    {`{"id":"a","resources":5}`, []string{"resources"}},
		"trailing data":      {`{"id":"a"} {"id":"b"}`, []string{"(document)"}},
		"not JSON":           {`id: a`, []string{"(document)"}},
		"empty":              {` `, []string{"(document)"}},
		"too large":          {`{"id":"a","team":"` + strings.Repeat("x", MaxDocumentBytes) + `"}`, []string{"(document)"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeJobSpecJSON([]byte(tc.doc))
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("DecodeJobSpecJSON = %v; want it decoded", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v; want *ValidationError", err)
			}
			if ve.Kind != "JobSpec" {
				t.Errorf("kind %q; want JobSpec", ve.Kind)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
				if f.Fix == "" || f.Problem == "" {
					t.Errorf("%s: problem %q, fix %q; want both", f.Field, f.Problem, f.Fix)
				}
			}
			if diff := cmp.Diff(got, tc.fields); diff != "" {
				t.Errorf("fields got(-), want(+):\n%s", diff)
			}
		})
	}
}

func TestUnknownFieldSuggestsTheFieldMeant(t *testing.T) {
	cases := map[string]string{
		`{"id":"a","teem":"x"}`:                 "did you mean team?",
		`{"id":"a","Priority":1}`:               "did you mean priority?",
		`{"id":"a","resources":{"zone":[]}}`:    "did you mean zones?",
		`{"id":"a","resources":{"colour":1}}`:   "check its spelling",
		`{"id":"a","checkpoint":{"intervl":1}}`: "did you mean interval?",
	}
	for doc, want := range cases {
		_, err := DecodeJobSpecJSON([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v; want it to say %q", doc, err, want)
		}
	}
}

func TestDecodeServiceSpecJSON(t *testing.T) {
	s, err := DecodeServiceSpecJSON([]byte(`{"id":"chat","max_replicas":2,"target":{"qps":1},"schedules":[{"cron":"@daily","duration":"1h"}]}`))
	if err != nil || s.ID != "chat" || len(s.Schedules) != 1 {
		t.Fatalf("DecodeServiceSpecJSON = %+v, %v", s, err)
	}
	_, err = DecodeServiceSpecJSON([]byte(`{"id":"chat","schedules":[{"cron":"@daily","duration":"soon","min_replica":1}]}`))
	var ve *ValidationError
	if !errors.As(err, &ve) || !ve.Has("schedules[0].duration") || !ve.Has("schedules[0].min_replica") {
		t.Errorf("error %v; want field errors on schedules[0].duration and schedules[0].min_replica", err)
	}
}

// The YAML path is as strict as the JSON one.
func TestParseJobSpecYAMLNamesNestedFields(t *testing.T) {
	_, err := ParseJobSpec([]byte("id: a\nwork: 1h\nresources:\n  gpu: 2\ncheckpoint:\n  interval: sometimes\n"), now)
	var ve *ValidationError
	if !errors.As(err, &ve) || !ve.Has("resources.gpu") {
		t.Fatalf("error %v; want a field error on resources.gpu", err)
	}
}

func TestCheckWorkflowID(t *testing.T) {
	if err := CheckWorkflowID("JobSpec", "llama-1", "llama-1"); err != nil {
		t.Errorf("matching ids: %v", err)
	}
	err := CheckWorkflowID("JobSpec", "llama-1", "3f2a-uuid")
	var ve *ValidationError
	if !errors.As(err, &ve) || !ve.Has("id") || !strings.Contains(err.Error(), "3f2a-uuid") {
		t.Errorf("error %v; want a field error on id naming the workflow ID", err)
	}
}

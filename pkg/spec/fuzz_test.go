package spec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Whatever a client sends, parsing never panics, every refusal is a
// field error that says what to fix and stays short, and whatever is
// accepted survives a trip through the workflow's own decoding unchanged.
// The seed corpus is in testdata/fuzz/FuzzParseJobSpec; `make fuzz` runs
// it for a few seconds.
func FuzzParseJobSpec(f *testing.F) {
	addExamples(f, "job.yaml", "deadline-job.yaml", "invalid-job.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseJobSpec(data, now)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		j, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("an accepted spec does not marshal: %v", err)
		}
		again, err := DecodeJobSpecJSON(j)
		if err != nil {
			t.Fatalf("the workflow refuses what starter accepted: %v\n%s", err, j)
		}
		again.Normalize()
		if err := again.Validate(now); err != nil {
			t.Fatalf("the spec is invalid once sent: %v\n%s", err, j)
		}
		if diff := cmp.Diff(s, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("the spec changed on its way to the workflow: got(-), want(+):\n%s", diff)
		}
	})
}

func FuzzParseServiceSpec(f *testing.F) {
	addExamples(f, "service.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseServiceSpec(data)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		sentUnchanged(t, s, DecodeServiceSpecJSON)
	})
}

func FuzzParseDevSpec(f *testing.F) {
	addExamples(f, "dev-http.yaml", "dev-notebook.yaml", "dev-ssh.yaml")
	f.Add([]byte("id: d\ncommand: [x]\nidle_timeout: 0\nworkspace: /w/\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseDevSpec(data)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		sentUnchanged(t, s, DecodeDevSpecJSON)
		js := s.Job()
		js.Normalize()
		if err := js.Validate(now); err != nil {
			t.Fatalf("the job an accepted environment runs under is invalid: %v", err)
		}
	})
}

// addExamples seeds a fuzz target with the example documents as well as
// its corpus in testdata.
func addExamples(f *testing.F, names ...string) {
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// checkRefusal asserts what every refusal of a document must be: a
// *ValidationError whose every field error names its field and a fix,
// short enough to read whatever the document held.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("refused with %T %v; want a *ValidationError naming the field", err, err)
	}
	if len(ve.Fields) == 0 {
		t.Fatalf("refused with no field error: %v", err)
	}
	for _, fe := range ve.Fields {
		if fe.Field == "" || fe.Problem == "" || fe.Fix == "" {
			t.Errorf("field error %+v lacks its field, problem or fix", fe)
		}
		if len(fe.Error()) > 1024 {
			t.Errorf("field error of %d bytes: %.200s…", len(fe.Error()), fe.Error())
		}
	}
}

// sentUnchanged checks that a spec starter accepted reaches its workflow
// as it was: it marshals, the workflow decodes it, and it is still valid
// and the same.
func sentUnchanged[S any, P interface {
	*S
	Normalize()
	Validate() error
}](t *testing.T, s S, decode func([]byte) (S, error)) {
	t.Helper()
	j, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("an accepted spec does not marshal: %v", err)
	}
	again, err := decode(j)
	if err != nil {
		t.Fatalf("the workflow refuses what starter accepted: %v\n%s", err, j)
	}
	P(&again).Normalize()
	if err := P(&again).Validate(); err != nil {
		t.Fatalf("the spec is invalid once sent: %v\n%s", err, j)
	}
	if diff := cmp.Diff(s, again, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("the spec changed on its way to the workflow: got(-), want(+):\n%s", diff)
	}
}

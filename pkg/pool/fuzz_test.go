package pool

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"refuel/pkg/spec"
)

// Whatever a pools file holds, parsing never panics nor runs out of
// memory, every refusal is a field error with a fix, and an accepted file
// is the same config once sent to the CapacityPool workflow as JSON. The
// seed corpus is in testdata/fuzz/FuzzParsePools.
func FuzzParsePools(f *testing.F) {
	data, err := os.ReadFile("../../examples/pools.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(example))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			var ve *spec.ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) == 0 {
				t.Fatalf("refused with %T %v; want field errors", err, err)
			}
			for _, fe := range ve.Fields {
				if fe.Field == "" || fe.Problem == "" || fe.Fix == "" || len(fe.Error()) > 1024 {
					t.Errorf("field error %.300q lacks its field, problem or fix, or is too long", fe.Error())
				}
			}
			return
		}
		if n := len(c.Base.Inventory()); n > MaxBaseMachines {
			t.Fatalf("accepted %d base machines; the limit is %d", n, MaxBaseMachines)
		}
		j, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("an accepted config does not marshal: %v", err)
		}
		again, err := ParseConfig(j)
		if err != nil {
			t.Fatalf("the config is refused once sent: %v\n%s", err, j)
		}
		if diff := cmp.Diff(c, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("the config changed once sent: got(-), want(+):\n%s", diff)
		}
	})
}

package activities

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
)

// A mem:// checkpoint store lives in one process: a worker whose
// instances are processes of their own refuses it before anything is
// acquired; one that hosts its instances in-process takes it.
func TestMemStoreOnlyWhereInstancesShareTheProcess(t *testing.T) {
	for name, tc := range map[string]struct {
		inProcess bool
		url       string
		refused   bool
	}{
		"processes, mem://":  {false, "mem://", true},
		"processes, file://": {false, "file:///tmp/ckpt", false},
		"processes, default": {false, "", false},
		"in-process, mem://": {true, "mem://", false},
	} {
		t.Run(name, func(t *testing.T) {
			a := &Capacity{Providers: nil, InProcessInstances: tc.inProcess}
			_, err := a.ListOfferings(context.Background(), OfferingsInput{CheckpointURL: tc.url})
			var app *temporal.ApplicationError
			refused := errors.As(err, &app) && app.Type() == "InvalidJobSpec"
			if refused != tc.refused {
				t.Fatalf("error %v; refused %v, want %v", err, refused, tc.refused)
			}
			if refused && (!app.NonRetryable() || !strings.Contains(err.Error(), "checkpoint.url") || !strings.Contains(err.Error(), "file://")) {
				t.Errorf("error %q: want a final error naming checkpoint.url and what to use", err)
			}
		})
	}
}

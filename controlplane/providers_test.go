package controlplane

import (
	"slices"
	"strings"
	"testing"
)

func TestProviderNames(t *testing.T) {
	for in, want := range map[string]struct {
		names []string
		err   string // a part of the error; "" for none
	}{
		"":              {names: []string{"local"}},
		"sim":           {names: []string{"sim"}},
		"aws,gce":       {names: []string{"aws", "gce"}},
		" gce , aws ":   {names: []string{"gce", "aws"}},
		"aws,,gce":      {err: "an empty name"},
		"aws,aws":       {err: "aws named twice"},
		"aws,sim":       {err: "local and sim are whole markets"},
		"local,gce":     {err: "local and sim are whole markets"},
		"gce,unknown-x": {names: []string{"gce", "unknown-x"}}, // refused by startProvider, naming it
	} {
		got, err := ProviderNames(in)
		switch {
		case want.err != "" && (err == nil || !strings.Contains(err.Error(), want.err)):
			t.Errorf("ProviderNames(%q) = %v, %v; want an error saying %q", in, got, err, want.err)
		case want.err == "" && (err != nil || !slices.Equal(got, want.names)):
			t.Errorf("ProviderNames(%q) = %v, %v; want %v", in, got, err, want.names)
		}
	}
}

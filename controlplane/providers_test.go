package controlplane

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"refuel/pkg/cloud/gce"
	"refuel/pkg/cloud/local"
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

// A gce provider that cannot work fails the start naming the setting to
// fix: no project, or no credentials to reach Google with.
func TestGCEProviderNamesTheMissingSetting(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no gcloud application-default login
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	t.Setenv(gce.EnvProject, "")
	for name, tc := range map[string]struct {
		cfg  gce.Config
		want string
	}{
		"no project":     {gce.Config{}, "--gce-project"},
		"no credentials": {gce.Config{Project: "p"}, "GOOGLE_APPLICATION_CREDENTIALS"},
	} {
		t.Run(name, func(t *testing.T) {
			s := &Stack{cfg: Config{GCE: tc.cfg, Logger: zap.NewNop()}, log: zap.NewNop()}
			_, err := s.startProvider(context.Background(), ProviderGCE, local.LauncherConfig{}, &providerSet{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--provider gce") {
				t.Errorf("start: %v; want an error of --provider gce naming %s", err, tc.want)
			}
		})
	}
}

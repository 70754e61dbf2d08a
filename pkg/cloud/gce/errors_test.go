package gce

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/api/googleapi"

	"refuel/pkg/capacity"
)

func TestClassOfCode(t *testing.T) {
	tests := map[string]capacity.Class{
		"ZONE_RESOURCE_POOL_EXHAUSTED":              capacity.NoCapacity,
		"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": capacity.NoCapacity,
		"QUOTA_EXCEEDED":                            capacity.Quota,
		"quotaExceeded":                             capacity.Quota,
		"rateLimitExceeded":                         capacity.Throttled,
		"UNSUPPORTED_OPERATION":                     capacity.SpecMismatch,
		"forbidden":                                 capacity.Config,
		"accessNotConfigured":                       capacity.Config,
		// Nobody mapped it: reported as itself, never as a stock-out.
		"SOMETHING_NEW": capacity.Unknown,
		"":              capacity.Unknown,
	}
	for code, want := range tests {
		if got := ClassOfCode(code); got != want {
			t.Errorf("ClassOfCode(%q) = %s, want %s", code, got, want)
		}
	}
}

func TestAPIErrorClasses(t *testing.T) {
	tests := map[string]struct {
		err       error
		code      string
		class     capacity.Class
		isAPIFail bool
	}{
		"credentials refused": {&googleapi.Error{Code: http.StatusUnauthorized, Message: "Request had invalid authentication credentials."}, "HTTP 401", capacity.Config, true},
		"permission denied":   {&googleapi.Error{Code: http.StatusForbidden, Errors: []googleapi.ErrorItem{{Reason: "forbidden", Message: "Required 'compute.instances.create' permission"}}}, "forbidden", capacity.Config, true},
		"rate limit on 403":   {&googleapi.Error{Code: http.StatusForbidden, Errors: []googleapi.ErrorItem{{Reason: "rateLimitExceeded"}}}, "rateLimitExceeded", capacity.Throttled, true},
		"quota on 403":        {&googleapi.Error{Code: http.StatusForbidden, Errors: []googleapi.ErrorItem{{Reason: "quotaExceeded"}}}, "quotaExceeded", capacity.Quota, true},
		"429":                 {&googleapi.Error{Code: http.StatusTooManyRequests}, "HTTP 429", capacity.Throttled, true},
		"type not in the zone": {&googleapi.Error{Code: http.StatusBadRequest, Errors: []googleapi.ErrorItem{{Reason: "invalid",
			Message: "Invalid value for field 'resource.machineType': 'zones/us-east4-a/machineTypes/a2-highgpu-1g'. Machine type with name 'a2-highgpu-1g' does not exist in zone 'us-east4-a'."}}}, "invalid", capacity.SpecMismatch, true},
		"server error":     {&googleapi.Error{Code: http.StatusInternalServerError, Errors: []googleapi.ErrorItem{{Reason: "backendError"}}}, "backendError", capacity.Unknown, true},
		"not an API error": {errors.New("connection refused"), "", capacity.Unknown, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, class, _, ok := apiError(tc.err)
			if code != tc.code || class != tc.class || ok != tc.isAPIFail {
				t.Errorf("apiError = %q %s %v, want %q %s %v", code, class, ok, tc.code, tc.class, tc.isAPIFail)
			}
		})
	}
}

func TestConfigErrorsNameTheSetting(t *testing.T) {
	t.Setenv(EnvProject, "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json")
	tests := map[string]struct {
		cfg  Config
		want string
	}{
		"no project":          {Config{}, "--gce-project"},
		"missing credentials": {Config{Project: "p"}, "GOOGLE_APPLICATION_CREDENTIALS"},
		"attached GPUs half":  {Config{Project: "p", Endpoint: "http://x/", MachineTypes: []MachineType{{Name: "n1-standard-8", Accelerator: "nvidia-tesla-t4"}}}, "Accelerator and a positive GPUs"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := New(t.Context(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestProjectFromEnvironment(t *testing.T) {
	t.Setenv(EnvProject, "from-env")
	c, err := New(t.Context(), Config{Endpoint: "http://127.0.0.1:1/compute/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Project() != "from-env" {
		t.Errorf("project %q, want from-env", c.Project())
	}
}

func TestDefaultPrices(t *testing.T) {
	p := DefaultPrices()
	if p.Source == "" || p.Date == "" {
		t.Error("the built-in price table names no source or date")
	}
	got, ok := p.Lookup("a3-highgpu-8g", "us-east4")
	if !ok || got.Spot != 14.8534 || got.OnDemand != 82.5254 {
		t.Errorf("a3-highgpu-8g in us-east4: %+v %v, want the trace's 14.8534 spot, 82.5254 on demand", got, ok)
	}
	if got, ok := p.Lookup("a2-highgpu-1g", "asia-east1"); !ok || got.Region != DefaultRegion {
		t.Errorf("a region the table lacks: %+v %v, want %s's price", got, ok, DefaultRegion)
	}
	if _, ok := p.Lookup("n9-unknown", "us-central1"); ok {
		t.Error("a machine type the table lacks was priced")
	}
}

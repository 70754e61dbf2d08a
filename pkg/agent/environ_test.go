package agent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTrainerHoldsOnlyItsOwnSecrets runs a real trainer process under an
// agent whose environment holds the secrets an agent has (cloud
// credentials, Temporal API key and TLS key, codec keys) and checks the
// trainer's whole environment: the allowlist, the job's env, the contract.
func TestTrainerHoldsOnlyItsOwnSecrets(t *testing.T) {
	agentEnv := map[string]string{
		"AWS_ACCESS_KEY_ID":              "AKIAAGENT",
		"AWS_SECRET_ACCESS_KEY":          "agent-secret",
		"AWS_SESSION_TOKEN":              "agent-token",
		"TEMPORAL_API_KEY":               "agent-api-key",
		"TEMPORAL_ADDRESS":               "temporal.example:7233",
		"TEMPORAL_TLS_CLIENT_KEY_PATH":   "/etc/refuel/agent.key",
		"TEMPORAL_TLS_CLIENT_CERT_PATH":  "/etc/refuel/agent.crt",
		"REFUEL_CODEC_KEYS":              "/etc/refuel/codec.keys",
		"REFUEL_DEPLOYMENT":              "prod",
		"GOOGLE_APPLICATION_CREDENTIALS": "/etc/refuel/gcp.json",
		// The allowlist.
		"PATH":     "/usr/bin:/bin",
		"HOME":     "/home/agent",
		"LANG":     "C.UTF-8",
		"LC_ALL":   "C.UTF-8",
		"LANGUAGE": "en",
		"TZ":       "UTC",
		"TMPDIR":   "/tmp",
	}
	for k, v := range agentEnv {
		t.Setenv(k, v)
	}
	h := newHarness(t)
	cfg := h.config("env",
		"JOB_SECRET=the-jobs-own",
		"WANDB_API_KEY=wandb-key",
		"REFUEL_JOB_ID=not-this-job", // the contract's variables win
		"HOME=/home/trainer",         // the job may set what it inherits
	)
	cfg.Attempt = 4
	cfg.CheckpointInterval = 1500 * time.Millisecond
	res, err := h.run(context.Background(), cfg)()
	if err != nil || res.Outcome != Completed {
		t.Fatalf("Run: %+v, %v", res, err)
	}

	got := map[string]string{}
	for line := range strings.Lines(h.stdout.String()) {
		if kv, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "ENVVAR "); ok {
			name, value, _ := strings.Cut(kv, "=")
			got[name] = value
		}
	}
	want := map[string]string{
		"PATH": "/usr/bin:/bin", "HOME": "/home/trainer", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "LANGUAGE": "en",
		"TZ": "UTC", "TMPDIR": "/tmp",
		"JOB_SECRET": "the-jobs-own", "WANDB_API_KEY": "wandb-key", fakeTrainerEnv: "env",
		"REFUEL_CHECKPOINT_DIR":              filepath.Join(cfg.Dir, "checkpoints"),
		"REFUEL_JOB_ID":                      "job-1",
		"REFUEL_INSTANCE_ID":                 "i-0123",
		"REFUEL_ATTEMPT":                     "4",
		"REFUEL_CHECKPOINT_INTERVAL_SECONDS": "2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the trainer's environment (-want +got):\n%s", diff)
	}
	for name, secret := range agentEnv {
		if _, allowed := want[name]; !allowed && strings.Contains(h.stdout.String(), secret) {
			t.Errorf("the value of the agent's %s reached the trainer", name)
		}
	}
}

func TestTrainerEnv(t *testing.T) {
	cases := map[string]struct {
		agent, job, contract []string
		want                 []string
		wantErr              string
	}{
		"no PATH anywhere gets the usual one": {
			want: []string{"PATH=" + defaultPath},
		},
		"job PATH replaces the agent's": {
			agent: []string{"PATH=/agent", "SHELL=/bin/sh"}, job: []string{"PATH=/venv/bin:/usr/bin"},
			want: []string{"PATH=/venv/bin:/usr/bin"},
		},
		"values may hold =": {
			job: []string{"OPTS=a=b"}, want: []string{"OPTS=a=b", "PATH=" + defaultPath},
		},
		"contract wins": {
			job: []string{"REFUEL_ATTEMPT=9"}, contract: []string{"REFUEL_ATTEMPT=2"},
			want: []string{"PATH=" + defaultPath, "REFUEL_ATTEMPT=2"},
		},
		"LC_ prefix only": {
			agent: []string{"LC_CTYPE=C", "LCX=1", "XLC_ALL=1", "PATHS=1"},
			want:  []string{"LC_CTYPE=C", "PATH=" + defaultPath},
		},
		"bad names": {
			job: []string{"=x", "A\x00B=1"}, wantErr: `env: "=x", "A\x00B=1": a variable needs a name`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := trainerEnv(tc.agent, tc.job, tc.contract)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

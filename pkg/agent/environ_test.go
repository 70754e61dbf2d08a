package agent

import (
	"context"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/checkpoint"
	"refuel/pkg/jobenv"
)

// TestTrainerKeepsTheMachineLessRefuelsSecrets runs a real trainer
// process under an agent whose environment holds what a machine's image
// sets for its hardware (BLAS, CUDA, NCCL, fabric settings) beside the
// secrets an agent has (cloud credentials, Temporal address, API key and
// TLS key, codec keys, join token): the first reach the trainer, the
// second do not; the job's env overrides the machine's, and the
// contract's variables override both.
func TestTrainerKeepsTheMachineLessRefuelsSecrets(t *testing.T) {
	secrets := map[string]string{
		"AWS_ACCESS_KEY_ID":              "AKIAAGENT",
		"AWS_SECRET_ACCESS_KEY":          "agent-secret",
		"AWS_SESSION_TOKEN":              "agent-token",
		"TEMPORAL_API_KEY":               "agent-api-key",
		"TEMPORAL_ADDRESS":               "temporal.example:7233",
		"TEMPORAL_TLS_CLIENT_KEY_PATH":   "/etc/refuel/agent.key",
		"TEMPORAL_TLS_CLIENT_CERT_PATH":  "/etc/refuel/agent.crt",
		"REFUEL_CODEC_KEYS":              "/etc/refuel/codec.keys",
		"REFUEL_JOIN_TOKEN_FILE":         "/etc/refuel/join.token",
		"REFUEL_DEPLOYMENT":              "prod",
		"GOOGLE_APPLICATION_CREDENTIALS": "/etc/refuel/gcp.json",
	}
	machine := map[string]string{
		"OPENBLAS_CORETYPE":    "Haswell",
		"OPENBLAS_L2_SIZE":     "512",
		"LD_LIBRARY_PATH":      "/usr/local/cuda/lib64",
		"CUDA_VISIBLE_DEVICES": "0,1",
		"NCCL_SOCKET_IFNAME":   "eth0",
		"FI_PROVIDER":          "efa",
		"PATH":                 "/usr/bin:/bin",
		"HOME":                 "/home/agent",
		"LC_ALL":               "C.UTF-8",
		"TZ":                   "UTC",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	for k, v := range machine {
		t.Setenv(k, v)
	}
	h := newHarness(t)
	cfg := h.config("env",
		"JOB_SECRET=the-jobs-own",
		"WANDB_API_KEY=wandb-key",
		"NCCL_SOCKET_IFNAME=ib0",     // the job's env overrides the machine's
		"REFUEL_JOB_ID=not-this-job", // the contract's variables win
		"HOME=/home/trainer",
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
	want := maps.Clone(machine)
	maps.Copy(want, map[string]string{
		"NCCL_SOCKET_IFNAME": "ib0", "HOME": "/home/trainer",
		"JOB_SECRET": "the-jobs-own", "WANDB_API_KEY": "wandb-key", fakeTrainerEnv: "env",
		"REFUEL_CHECKPOINT_DIR":              filepath.Join(cfg.Dir, "checkpoints"),
		"REFUEL_JOB_ID":                      "job-1",
		"REFUEL_INSTANCE_ID":                 "i-0123",
		"REFUEL_ATTEMPT":                     "4",
		"REFUEL_CHECKPOINT_INTERVAL_SECONDS": "2",
	})
	for name, value := range want {
		if got[name] != value {
			t.Errorf("the trainer's %s = %q, want %q", name, got[name], value)
		}
	}
	for name, value := range got {
		if _, ok := want[name]; !ok && jobenv.Withheld(name) {
			t.Errorf("the machine's %s=%q reached the trainer", name, value)
		}
	}
	for name, secret := range secrets {
		if strings.Contains(h.stdout.String(), secret) {
			t.Errorf("the value of the agent's %s reached the trainer", name)
		}
	}

	// The attempt's output names what the trainer got and what was
	// withheld, never a value.
	var line string
	for _, l := range streamLines(h.storedOutput(4), checkpoint.AgentStream) {
		if strings.Contains(l, "environment: ") {
			line = l
		}
	}
	for _, name := range []string{"OPENBLAS_CORETYPE", "NCCL_SOCKET_IFNAME", "REFUEL_ATTEMPT", "withheld from the machine's:", "AWS_SECRET_ACCESS_KEY", "TEMPORAL_API_KEY"} {
		if !strings.Contains(line, name) {
			t.Errorf("the environment line lacks %s: %q", name, line)
		}
	}
	for _, value := range []string{"Haswell", "agent-secret", "ib0"} {
		if strings.Contains(line, value) {
			t.Errorf("the environment line shows the value %q: %q", value, line)
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
			want: []string{"PATH=/venv/bin:/usr/bin", "SHELL=/bin/sh"},
		},
		"values may hold =": {
			job: []string{"OPTS=a=b"}, want: []string{"OPTS=a=b", "PATH=" + defaultPath},
		},
		"contract wins": {
			job: []string{"REFUEL_ATTEMPT=9"}, contract: []string{"REFUEL_ATTEMPT=2"},
			want: []string{"PATH=" + defaultPath, "REFUEL_ATTEMPT=2"},
		},
		"the machine's, less refuel's": {
			agent: []string{"LC_CTYPE=C", "OPENBLAS_CORETYPE=Haswell", "AWS_SECRET_ACCESS_KEY=s", "REFUEL_CODEC_KEYS=/k", "TEMPORAL_ADDRESS=t"},
			want:  []string{"LC_CTYPE=C", "OPENBLAS_CORETYPE=Haswell", "PATH=" + defaultPath},
		},
		"job over machine": {
			agent: []string{"OMP_NUM_THREADS=8"}, job: []string{"OMP_NUM_THREADS=1"},
			want: []string{"OMP_NUM_THREADS=1", "PATH=" + defaultPath},
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

package tests

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"refuel/workflows/training"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/proto"

	"refuel/controlplane"
	"refuel/internal/cluster"
	"refuel/internal/codec"
	"refuel/jobs"
	awscloud "refuel/pkg/cloud/aws"
	"refuel/pkg/devserver"
	"refuel/pkg/spec"
	"refuel/workflows"
)

// secureEnv are the standard client settings of a test's refuel clients
// for a frontend that serves TLS with the pki's certificate, wants a client
// certificate and takes apiKey.
func secureEnv(p pki, apiKey string) map[string]string {
	return map[string]string{
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH": p.caCert,
		"TEMPORAL_TLS_CLIENT_CERT_PATH":    p.clientCert,
		"TEMPORAL_TLS_CLIENT_KEY_PATH":     p.clientKey,
		"TEMPORAL_API_KEY":                 apiKey,
	}
}

// runSecretJob runs a short job whose spec holds secret in its checkpoint
// URL to completion, and returns its id.
func runSecretJob(t *testing.T, s *controlplane.Stack, id, secret string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js := quickJob(id, spec.TierFlexible)
	js.Team = "secure-team"
	js.Checkpoint.URL = "file://" + t.TempDir() + "/" + secret
	if _, err := jobs.Submit(ctx, s.Client, js); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.WaitFor(ctx, s.Client, id, func(st training.Status) bool { return st.State == workflows.StateCompleted }); err != nil {
		t.Fatal(err)
	}
}

// TestSecureEmbeddedStack runs the whole stack with every guard on: TLS
// and client certificates on the frontend, API keys, encrypted payloads.
// The worker, its node agents and the Web UI get in with the standard
// client settings; clients that lack any of them are refused; the history
// holds ciphertext while search attributes stay queryable; the codec
// server decodes for the Web UI's origin and for the CLI's remote codec.
func TestSecureEmbeddedStack(t *testing.T) {
	parallel(t)
	p := newPKI(t)
	const apiKey, secret = "refuel-test-key-0123456789", "ckpt-path-nobody-may-read"
	keyFile := writeSecret(t, p.dir, "api-keys", "# one key a line\n"+apiKey+"\nanother-key-abcdefghijklmnop\n")
	codecKeys := writeSecret(t, p.dir, "codec-keys", codecKeyLine(t, "k1"))
	s := startStack(t, func(c *controlplane.Config) {
		c.UIAddr = "127.0.0.1:0"
		c.Target.Env = secureEnv(p, apiKey)
		c.Target.CodecKeys = codecKeys
		c.Security = controlplane.Security{
			TLS:        devserver.TLS{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.caCert},
			APIKeyFile: keyFile, CodecServer: "127.0.0.1:0",
		}
	})
	const id = "secure-run"
	runSecretJob(t, s, id, secret)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("refused without credentials", func(t *testing.T) {
		caPool := x509.NewCertPool()
		pem, _ := os.ReadFile(p.caCert)
		caPool.AppendCertsFromPEM(pem)
		mine, _ := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
		other, _ := tls.LoadX509KeyPair(p.otherCert, p.otherKey)
		withCert := func(c tls.Certificate) *tls.Config {
			return &tls.Config{RootCAs: caPool, Certificates: []tls.Certificate{c}}
		}
		cases := map[string]client.ConnectionOptions{
			"plaintext":                        {},
			"TLS without a client certificate": {TLS: &tls.Config{RootCAs: caPool}},
			"another CA's client certificate":  {TLS: withCert(other)},
		}
		for name, conn := range cases {
			if _, err := dialRaw(ctx, s.Address, conn, ""); err == nil {
				t.Errorf("%s: connected", name)
			} else {
				t.Logf("%s: %v", name, err)
			}
		}
		for name, key := range map[string]string{"no API key": "", "unknown API key": "not-a-key-of-this-server"} {
			c, err := dialRaw(ctx, s.Address, client.ConnectionOptions{TLS: withCert(mine)}, key)
			if err == nil {
				_, err = c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default"})
				c.Close()
			}
			var denied *serviceerror.PermissionDenied
			if !errors.As(err, &denied) {
				t.Errorf("%s: got %v, want PermissionDenied", name, err)
			}
		}
	})

	raw := rawClient(ctx, t, s.Address, p, apiKey)
	t.Run("history holds ciphertext", func(t *testing.T) {
		start := startedEvent(ctx, t, raw, id)
		input := start.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
		if enc := string(input.GetMetadata()[codec.MetadataEncoding]); enc != codec.EncodingName {
			t.Errorf("input encoding %q, want %q", enc, codec.EncodingName)
		}
		iter := raw.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		events := 0
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			b, _ := proto.Marshal(ev)
			if bytes.Contains(b, []byte(secret)) {
				t.Fatalf("event %d (%s) holds the spec's checkpoint URL in the clear", ev.GetEventId(), ev.GetEventType())
			}
		}
		t.Logf("%d events, none with the secret", events)
	})

	t.Run("search attributes stay queryable", func(t *testing.T) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := raw.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: "default", Query: fmt.Sprintf(`RefuelTeam="secure-team" AND RefuelState="completed" AND WorkflowId=%q`, id),
			})
			if err == nil && len(resp.GetExecutions()) == 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("query by search attributes: %v, %v", resp, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("Web UI reads runs through the codec server", func(t *testing.T) {
		browser := httpsClient(t, p)
		var settings struct {
			Codec struct{ Endpoint string }
		}
		getJSON(t, browser, s.UIURL()+"/api/v1/settings", &settings)
		if settings.Codec.Endpoint != s.CodecURL || !strings.HasPrefix(s.CodecURL, "https://") {
			t.Errorf("the UI's codec endpoint is %q; want the worker's codec server %q over HTTPS", settings.Codec.Endpoint, s.CodecURL)
		}
		// What the browser does: fetch the history from the UI server (which
		// reaches the frontend with refuel's client settings), then have the
		// codec server decode its payloads, from the UI's origin.
		var history struct {
			History struct {
				Events []map[string]json.RawMessage
			}
		}
		getJSON(t, browser, s.UIURL()+"/api/v1/namespaces/default/workflows/"+id+"/history", &history)
		if len(history.History.Events) == 0 {
			t.Fatal("the UI returned no events")
		}
		var start struct {
			Input struct {
				Payloads []json.RawMessage
			}
		}
		if err := json.Unmarshal(history.History.Events[0]["workflowExecutionStartedEventAttributes"], &start); err != nil || len(start.Input.Payloads) == 0 {
			t.Fatalf("start event from the UI: %v", err)
		}
		if bytes.Contains(start.Input.Payloads[0], []byte(secret)) {
			t.Fatal("the UI server shows the input in the clear before any codec")
		}
		body := []byte(`{"payloads":[` + string(start.Input.Payloads[0]) + `]}`)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.CodecURL+"/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		req.Header.Set("Origin", s.UIURL())
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		decoded, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != s.UIURL() {
			t.Fatalf("decode from the UI's origin: %d, CORS %q: %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), decoded)
		}
		var out struct{ Payloads []struct{ Data string } }
		if err := json.Unmarshal(decoded, &out); err != nil || len(out.Payloads) != 1 {
			t.Fatalf("decode answer %s: %v", decoded, err)
		}
		data, _ := base64.StdEncoding.DecodeString(out.Payloads[0].Data)
		if !bytes.Contains(data, []byte(secret)) {
			t.Errorf("decoded input lacks the spec: %s", data)
		}
	})

	t.Run("the server's own workers get in", func(t *testing.T) {
		// Schedules run in the server's system worker, which has neither a
		// client certificate nor an API key: the internal frontend serves it.
		if err := controlplane.EnsureJanitorSchedule(ctx, s.Client, time.Second); err != nil {
			t.Fatal(err)
		}
		h := s.Client.ScheduleClient().GetHandle(ctx, controlplane.JanitorScheduleID)
		deadline := time.Now().Add(30 * time.Second)
		for {
			desc, err := h.Describe(ctx)
			if err == nil && len(desc.Info.RecentActions) > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the janitor schedule never fired: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("CLI remote codec decodes", func(t *testing.T) {
		start := startedEvent(ctx, t, raw, id)
		remote := converter.NewRemoteDataConverter(converter.GetDefaultDataConverter(), converter.RemoteDataConverterOptions{
			Endpoint: s.CodecURL, Client: *httpsClient(t, p),
		})
		var js spec.JobSpec
		if err := remote.FromPayloads(start.GetWorkflowExecutionStartedEventAttributes().GetInput(), &js); err != nil {
			t.Fatal(err)
		}
		if js.ID != id || !strings.Contains(js.Checkpoint.URL, secret) {
			t.Errorf("decoded spec %+v", js)
		}
	})
}

// dialRaw connects with exactly the given settings and no codec.
func dialRaw(ctx context.Context, addr string, conn client.ConnectionOptions, apiKey string) (client.Client, error) {
	opts := client.Options{HostPort: addr, Namespace: "default", ConnectionOptions: conn,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	if apiKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(apiKey)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return client.DialContext(ctx, opts)
}

// rawClient is a client with every credential but no codec keys: it sees
// the history as the server stores it.
func rawClient(ctx context.Context, t *testing.T, addr string, p pki, apiKey string) client.Client {
	t.Helper()
	c, err := dialRaw(ctx, addr, client.ConnectionOptions{TLS: clientTLS(t, p)}, apiKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func clientTLS(t *testing.T, p pki) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(p.caCert)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("CA: %v", err)
	}
	cert, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
}

// httpsClient trusts the test's CA, as an operator's browser would.
func httpsClient(t *testing.T, p pki) *http.Client {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(t, p)}}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func getJSON(t *testing.T, c *http.Client, url string, v any) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}

// startedEvent is the run's first event, which holds its input.
func startedEvent(ctx context.Context, t *testing.T, c client.Client, id string) *historypb.HistoryEvent {
	t.Helper()
	iter := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := iter.Next()
	if err != nil {
		t.Fatal(err)
	}
	if ev.GetEventType() != enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
		t.Fatalf("first event is %s", ev.GetEventType())
	}
	return ev
}

// TestExternalClusterWithClientSettings starts a guarded server apart,
// as an operator's cluster, and the control plane against it with nothing
// but the standard client settings: the worker and its node agents run a
// job; without the API key the control plane does not start, and says why.
func TestExternalClusterWithClientSettings(t *testing.T) {
	parallel(t)
	p := newPKI(t)
	const apiKey = "external-cluster-key-0123456789"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := secureEnv(p, apiKey)
	srv := startDevserver(ctx, t, devserver.Options{
		FrontendAddr: "127.0.0.1:0", SearchAttributes: workflows.SearchAttributeTypes,
		TLS:     devserver.TLS{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.caCert},
		APIKeys: []string{apiKey},
		Client: devserver.Client{APIKey: apiKey, TLS: &envconfig.ClientConfigTLS{
			ServerCACertPath: p.caCert, ClientCertPath: p.clientCert, ClientKeyPath: p.clientKey,
		}},
	})
	env["TEMPORAL_ADDRESS"] = srv.FrontendAddr()

	s := startStack(t, func(c *controlplane.Config) { c.Target.Env = env })
	if s.Server != nil {
		t.Fatal("the control plane started an embedded server although TEMPORAL_ADDRESS names a cluster")
	}
	runSecretJob(t, s, "external-run", "external-secret")

	without := maps.Clone(env)
	delete(without, "TEMPORAL_API_KEY")
	cfg := controlplane.Config{InMemory: true, DataDir: t.TempDir(), MetricsAddr: "-", JanitorEvery: -1, Target: cluster.Target{Env: without}}
	_, err := controlplane.Start(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "refused refuel's credentials") || !strings.Contains(err.Error(), "TEMPORAL_API_KEY") {
		t.Errorf("start without the API key: got %v, want an error saying the credentials were refused and naming TEMPORAL_API_KEY", err)
	}
}

// TestCodecKeyRotation rotates the codec key under a running workflow: a
// run started under the old key is paused, the worker restarts with a new
// key first and the old one after it, and the run resumes and completes.
// Its history then holds payloads of both keys, and the worker with both
// replays it.
func TestCodecKeyRotation(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	oldLine, newLine := codecKeyLine(t, "2026-01"), codecKeyLine(t, "2026-02")
	before := writeSecret(t, dir, "keys-before", oldLine)
	during := writeSecret(t, dir, "keys-during", newLine+oldLine)
	data := t.TempDir()
	stack := func(keys string) *controlplane.Stack {
		return startStack(t, func(c *controlplane.Config) {
			c.InMemory, c.DataDir = false, data
			c.Target.CodecKeys = keys
			c.Security.CodecServer = "127.0.0.1:0"
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const id = "rotated-run"

	first := stack(before)
	js := quickJob(id, spec.TierFlexible)
	js.Work = spec.Duration(16 * time.Second) // room to pause it before it ends, on a busy machine
	if _, err := jobs.Submit(ctx, first.Client, js); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.WaitFor(ctx, first.Client, id, func(st training.Status) bool { return st.LastCheckpoint != nil }); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Pause(ctx, first.Client, id); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.WaitFor(ctx, first.Client, id, func(st training.Status) bool { return st.Paused && st.Instance == nil }); err != nil {
		t.Fatal(err)
	}
	first.Stop()

	second := stack(during)
	if err := jobs.Resume(ctx, second.Client, id); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.WaitFor(ctx, second.Client, id, func(st training.Status) bool { return st.State == workflows.StateCompleted }); err != nil {
		t.Fatal(err)
	}

	seen := map[string]int{}
	iter := second.Client.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range payloadsOf(ev) {
			seen[string(p.GetMetadata()[codec.MetadataKeyID])]++
		}
	}
	if seen["2026-01"] == 0 || seen["2026-02"] == 0 || seen[""] != 0 {
		t.Errorf("payloads by key ID: %v; want both keys and no plaintext", seen)
	}

	// What the stack keeps on disk is its user's alone.
	for name, want := range map[string]os.FileMode{"": 0o700, "temporal.db": 0o600, "market-memory": 0o700, "checkpoints": 0o700} {
		info, err := os.Stat(filepath.Join(data, name))
		if err != nil {
			t.Error(err)
		} else if got := info.Mode().Perm(); got != want {
			t.Errorf("%s/%s: mode %04o, want %04o", data, name, got, want)
		}
	}
}

// payloadsOf are the payloads of the events a run's input, signals and
// activity results put in its history.
func payloadsOf(ev *historypb.HistoryEvent) []*commonpb.Payload {
	var ps []*commonpb.Payload
	add := func(p *commonpb.Payloads) { ps = append(ps, p.GetPayloads()...) }
	add(ev.GetWorkflowExecutionStartedEventAttributes().GetInput())
	add(ev.GetWorkflowExecutionSignaledEventAttributes().GetInput())
	add(ev.GetActivityTaskScheduledEventAttributes().GetInput())
	add(ev.GetActivityTaskCompletedEventAttributes().GetResult())
	return ps
}

// TestBadSecurityConfigurationFailsAtStart: every mistake stops the start
// with an error naming the flag or setting to fix, never a stack that
// quietly serves plaintext.
func TestBadSecurityConfigurationFailsAtStart(t *testing.T) {
	parallel(t)
	p := newPKI(t)
	const apiKey = "refuel-test-key-0123456789"
	goodKeys := writeSecret(t, p.dir, "api-keys", apiKey+"\n")
	shortKey := writeSecret(t, p.dir, "short-keys", apiKey+"\nshort\n")
	openKeys := filepath.Join(p.dir, "open-keys")
	if err := os.WriteFile(openKeys, []byte(apiKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badCodec := writeSecret(t, p.dir, "codec-keys", "k1:c2hvcnQ=\n")
	token := writeSecret(t, p.dir, "token", "0123456789abcdef0123\n")
	serverTLS := devserver.TLS{CertFile: p.serverCert, KeyFile: p.serverKey}
	tests := map[string]struct {
		sec       controlplane.Security
		env       map[string]string
		codecKeys string
		want      string
	}{
		"certificate without key":           {sec: controlplane.Security{TLS: devserver.TLS{CertFile: p.serverCert}}, want: "--tls-cert: given without --tls-key"},
		"key without certificate":           {sec: controlplane.Security{TLS: devserver.TLS{KeyFile: p.serverKey}}, want: "--tls-key: given without --tls-cert"},
		"client CA without certificate":     {sec: controlplane.Security{TLS: devserver.TLS{ClientCAFile: p.caCert}}, want: "--tls-client-ca: mutual TLS needs the server's own certificate"},
		"certificate with another's key":    {sec: controlplane.Security{TLS: devserver.TLS{CertFile: p.serverCert, KeyFile: p.clientKey}}, want: "--tls-cert/--tls-key"},
		"client CA that is no certificate":  {sec: controlplane.Security{TLS: devserver.TLS{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.serverKey}}, want: "holds no PEM certificate"},
		"TLS server, plaintext clients":     {sec: controlplane.Security{TLS: serverTLS}, want: "TEMPORAL_TLS_SERVER_CA_CERT_PATH"},
		"mTLS server, clients without cert": {sec: controlplane.Security{TLS: devserver.TLS{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.caCert}}, env: map[string]string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH": p.caCert}, want: "TEMPORAL_TLS_CLIENT_CERT_PATH"},
		"API key file with a short key":     {sec: controlplane.Security{APIKeyFile: shortKey}, want: "line 2: a key of 5 characters"},
		"API key file others can read":      {sec: controlplane.Security{APIKeyFile: openKeys}, want: "chmod 600"},
		"API keys, clients without one":     {sec: controlplane.Security{TLS: serverTLS, APIKeyFile: goodKeys}, env: map[string]string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH": p.caCert}, want: "set TEMPORAL_API_KEY"},
		"API keys, clients with another":    {sec: controlplane.Security{TLS: serverTLS, APIKeyFile: goodKeys}, env: map[string]string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH": p.caCert, "TEMPORAL_API_KEY": "some-other-key-0123456789"}, want: "not one of the file's keys"},
		"API key over plaintext":            {sec: controlplane.Security{APIKeyFile: goodKeys}, env: map[string]string{"TEMPORAL_API_KEY": apiKey}, want: "TEMPORAL_TLS=false"},
		"codec key of the wrong size":       {codecKeys: badCodec, want: "line 1: key \"k1\" is 5 bytes; AES-256 needs 32"},
		"codec token without keys":          {sec: controlplane.Security{CodecTokenFile: token}, want: "--codec-token-file guards the codec server, which runs only with codec keys"},
		"guards on an external cluster":     {sec: controlplane.Security{TLS: serverTLS}, env: map[string]string{"TEMPORAL_ADDRESS": "127.0.0.1:1"}, want: "guard the embedded server"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = map[string]string{}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := controlplane.Start(ctx, controlplane.Config{
				InMemory: true, DataDir: t.TempDir(), FrontendAddr: "127.0.0.1:0", UIAddr: "-", MetricsAddr: "-", JanitorEvery: -1,
				Target: cluster.Target{Env: env, CodecKeys: tc.codecKeys}, Security: tc.sec,
			})
			if err == nil {
				s.Stop()
				t.Fatalf("started; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// TestEC2EndpointChecksSignaturesAndControlToken runs a job through the
// AWS provider, whose every call the in-process EC2 endpoint verifies
// (Signature Version 4, the real SDK on both sides); a provider with a
// wrong secret is refused with AuthFailure; the sim's
// controls want their token.
func TestEC2EndpointChecksSignaturesAndControlToken(t *testing.T) {
	parallel(t)
	const token = "sim-control-token-0123456789"
	s := startStack(t, func(c *controlplane.Config) {
		c.Provider = controlplane.ProviderAWS
		c.Sim = controlplane.SimConfig{Traces: market(t, map[string][]int{"us-west-2a": {1, 1}}), Speed: 0, Notice: 15 * time.Second,
			ServeEC2: "127.0.0.1:0", ControlToken: token}
		c.AWS = awscloud.Config{
			Region: "us-west-2", AccessKeyID: "AKIDREFUELTEST", SecretAccessKey: "the-provider-secret",
			LaunchTemplate: awscloud.LaunchTemplate{Name: "refuel-node"}, PollInterval: 100 * time.Millisecond,
			InstanceTypes: []awscloud.InstanceType{{Name: "p3.2xlarge", GPUs: 1, OnDemandPrice: 3.06}},
		}
	})
	runSecretJob(t, s, "signed-run", "signed-secret")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wrong, err := awscloud.New(ctx, awscloud.Config{
		Endpoint: "http://" + s.EC2Endpoint, Region: "us-west-2", AccessKeyID: "AKIDREFUELTEST", SecretAccessKey: "a-guessed-secret",
		LaunchTemplate: awscloud.LaunchTemplate{Name: "refuel-node"},
		InstanceTypes:  []awscloud.InstanceType{{Name: "p3.2xlarge", GPUs: 1, OnDemandPrice: 3.06}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wrong.List(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "AuthFailure") || !strings.Contains(err.Error(), "does not accept the credentials") {
		t.Errorf("provider with a wrong secret: got %v, want AuthFailure explained as refused credentials", err)
	}

	advance := func(auth string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.EC2Endpoint+"/sim/advance", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := advance(""); got != http.StatusUnauthorized {
		t.Errorf("/sim/advance without the token: %d, want 401", got)
	}
	if got := advance("Bearer " + token); got != http.StatusOK {
		t.Errorf("/sim/advance with the token: %d, want 200", got)
	}
}

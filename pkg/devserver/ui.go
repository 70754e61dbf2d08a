package devserver

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/labstack/echo/v4"
	uiserver "github.com/temporalio/ui-server/v2/server"
	uiapi "github.com/temporalio/ui-server/v2/server/api"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	"go.temporal.io/sdk/contrib/envconfig"
	"google.golang.org/grpc/metadata"
)

// Client are the client settings refuel's clients (the Web UI, the
// worker, its agents, starter) connect to the frontend with.
type Client struct {
	// TLS are the client's TLS settings, as the TEMPORAL_TLS_* environment
	// gives them to every refuel client; nil or disabled dials plaintext.
	TLS *envconfig.ClientConfigTLS
	// APIKey is sent with every call the UI makes on a browser's behalf.
	APIKey string
}

// UICodec points the Web UI at a remote codec server.
type UICodec struct {
	// Endpoint is the codec server's URL, such as http://127.0.0.1:8234.
	Endpoint string
	// IncludeCredentials makes the browser send its credentials for the
	// codec server (a token it was given there) along with each request.
	IncludeCredentials bool
}

// checkClient checks that clients with settings c get in: without this a
// guarded server would start and refuse its own worker and Web UI. The
// SDKs turn TLS on by themselves when they have an API key.
func (o Options) checkClient(c Client) error {
	tlsOn := c.APIKey != ""
	if c.TLS != nil {
		tlsOn = !c.TLS.Disabled
	}
	switch {
	case !o.TLS.Enabled() && tlsOn && c.APIKey != "" && c.TLS == nil:
		return &ConfigError{Flag: "--api-key-file", Reason: "clients with an API key use TLS unless told otherwise, and the frontend serves plaintext: serve TLS with --tls-cert and --tls-key, or, on loopback only, set TEMPORAL_TLS=false"}
	case !o.TLS.Enabled() && tlsOn:
		return &ConfigError{Flag: "--tls-cert", Reason: "the TEMPORAL_TLS* settings of refuel's clients ask for TLS, and the frontend serves plaintext: serve TLS with --tls-cert and --tls-key, or unset them"}
	case o.TLS.Enabled() && !tlsOn:
		return &ConfigError{Flag: "--tls-cert", Reason: "refuel's clients (this worker, its agents, the Web UI, starter) connect with the TEMPORAL_* settings, which do not use TLS: set TEMPORAL_TLS_SERVER_CA_CERT_PATH to the CA of the frontend's certificate (or TEMPORAL_TLS=true when the system trusts it)"}
	case o.TLS.ClientCAFile != "" && (c.TLS == nil || c.TLS.ClientCertPath == "" && len(c.TLS.ClientCertData) == 0):
		return &ConfigError{Flag: "--tls-client-ca", Reason: "refuel's clients need a client certificate the CA signed: set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"}
	case len(o.APIKeys) > 0 && c.APIKey == "":
		return &ConfigError{Flag: "--api-key-file", Reason: "refuel's clients need a key the frontend accepts: set TEMPORAL_API_KEY to one of the file's keys"}
	case len(o.APIKeys) > 0 && !slices.Contains(o.APIKeys, c.APIKey):
		return &ConfigError{Flag: "--api-key-file", Reason: "TEMPORAL_API_KEY is not one of the file's keys, so refuel's own clients would be refused: add it to the file or set one of them"}
	}
	return nil
}

// startUI runs the Web UI on addr, pointed at this server's frontend, and
// waits until it answers. The UI server's Start blocks until Stop, so it runs
// in a goroutine; s.uiDone closes when it returns.
func (s *Server) startUI(ctx context.Context, addr string, o Options) error {
	host, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	https := o.TLS.Enabled()
	cfg := &uiconfig.Config{
		TemporalGRPCAddress: dialable(s.frontendAddr),
		Host:                host,
		Port:                port,
		EnableUI:            true,
		DefaultNamespace:    o.Namespace,
		// Over plain HTTP on localhost a Secure cookie would never be sent
		// back; over HTTPS it must be Secure.
		CORS:     uiconfig.CORS{CookieInsecure: !https},
		HideLogs: true,
		// No calls out: the dev stack must work without internet.
		DisableNewsFetch:   true,
		NotifyOnNewVersion: false,
		TLS:                uiTLS(o.Client.TLS, dialable(s.frontendAddr)),
		Codec:              uiconfig.Codec{Endpoint: o.UICodec.Endpoint, IncludeCredentials: o.UICodec.IncludeCredentials},
	}
	if https {
		cfg.UIServerTLS = uiconfig.UIServerTLS{CertFile: o.TLS.CertFile, KeyFile: o.TLS.KeyFile}
	}
	opts := []uioptions.ServerOption{uioptions.WithConfigProvider(cfg)}
	if o.Client.APIKey != "" {
		opts = append(opts, uioptions.WithAPIMiddleware([]uiapi.Middleware{withAPIKey(o.Client.APIKey)}))
	}
	s.ui = uiserver.NewServer(opts...)
	s.uiDone = make(chan struct{})
	go func() {
		defer close(s.uiDone)
		// Start returns nil once Stop closes it; it exits the process itself
		// when it cannot listen, which is why launchOn holds the port until
		// just before.
		_ = s.ui.Start()
	}()

	s.uiURL = "http://" + dialable(addr)
	if https {
		s.uiURL = "https://" + dialable(addr)
	}
	return waitForUI(ctx, s.uiURL+"/healthz", s.uiDone)
}

// uiTLS turns refuel's client TLS settings into the UI server's, which
// takes certificate data base64-encoded and skips verifying the server
// unless told to verify.
func uiTLS(c *envconfig.ClientConfigTLS, frontend string) uiconfig.TLS {
	if c == nil || c.Disabled {
		return uiconfig.TLS{}
	}
	b64 := func(data []byte) string {
		if len(data) == 0 {
			return ""
		}
		return base64.StdEncoding.EncodeToString(data)
	}
	t := uiconfig.TLS{
		CaFile: c.ServerCACertPath, CaData: b64(c.ServerCACertData),
		CertFile: c.ClientCertPath, CertData: b64(c.ClientCertData),
		KeyFile: c.ClientKeyPath, KeyData: b64(c.ClientKeyData),
		ServerName:             c.ServerName,
		EnableHostVerification: !c.DisableHostVerification,
	}
	if t.ServerName == "" {
		// Without a server name, CA or certificate the UI server would dial
		// in the clear; naming the host makes it use TLS with the system's
		// roots, as the SDK does.
		t.ServerName, _, _ = net.SplitHostPort(frontend)
	}
	return t
}

// withAPIKey sends key with every call the UI server makes to the
// frontend, where the browser's requests carry none.
func withAPIKey(key string) uiapi.Middleware {
	return func(echo.Context) runtime.ServeMuxOption {
		return runtime.WithMetadata(func(context.Context, *http.Request) metadata.MD {
			return metadata.Pairs("authorization", "Bearer "+key)
		})
	}
}

// waitForUI polls the UI's health endpoint until it answers 200. Over
// HTTPS it does not verify the certificate: it asks its own listener on
// loopback whether it is up, and sends nothing.
func waitForUI(ctx context.Context, url string, done <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	defer client.CloseIdleConnections()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("devserver: Web UI: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devserver: Web UI at %s did not become ready: %w", url, ctx.Err())
		case <-done:
			return fmt.Errorf("devserver: Web UI at %s stopped while starting", url)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

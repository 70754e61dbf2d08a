package controlplane

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"refuel/internal/cluster"
	"refuel/internal/codec"
	"refuel/internal/secretfile"
	"refuel/pkg/devserver"
)

// Security is what guards a control plane. The codec keys themselves are
// the Target's (CodecKeys, or REFUEL_CODEC_KEYS), because every client
// needs them, not only this one.
type Security struct {
	// TLS serves the embedded frontend and Web UI over TLS, with client
	// certificates required when it names a client CA.
	TLS devserver.TLS
	// APIKeyFile holds the API keys the embedded frontend accepts, one a
	// line; every request must carry one.
	APIKeyFile string
	// CodecServer is where the remote codec is served when there are codec
	// keys: default codec.DefaultServerAddr, "-" for none.
	CodecServer string
	// CodecTokenFile holds a token the codec server asks every request for.
	CodecTokenFile string
}

// guard is Security resolved: files read, checked and the codec server's
// port bound, so nothing fails half-way through a start.
type guard struct {
	tls      devserver.TLS
	apiKeys  []string
	client   devserver.Client
	codec    *codec.Codec
	token    string
	codecLn  net.Listener
	codecURL string
	uiCodec  devserver.UICodec
}

// prepareSecurity reads and checks the security settings against the
// client options refuel's own clients use.
func (s *Stack) prepareSecurity() (guard, error) {
	sec := s.cfg.Security
	var g guard
	embedded := !cluster.External(s.cfg.Target)
	if !embedded && (sec.TLS.Enabled() || sec.APIKeyFile != "") {
		return g, errors.New("--tls-cert, --tls-key, --tls-client-ca and --api-key-file guard the embedded server, and an external cluster is configured (TEMPORAL_ADDRESS or a profile): configure TLS and keys on that cluster and give refuel its client settings (TEMPORAL_TLS_*, TEMPORAL_API_KEY)")
	}
	if err := sec.TLS.Validate(); err != nil {
		return g, err
	}
	g.tls = sec.TLS
	if sec.APIKeyFile != "" {
		keys, err := devserver.ReadAPIKeys(sec.APIKeyFile)
		if err != nil {
			return g, err
		}
		g.apiKeys = keys
	}
	prof, err := cluster.Profile(s.cfg.Target)
	if err != nil {
		return g, err
	}
	g.client = devserver.Client{TLS: prof.TLS, APIKey: prof.APIKey}

	if g.codec, err = cluster.Codec(s.cfg.Target); err != nil {
		return g, err
	}
	if g.codec == nil {
		if sec.CodecTokenFile != "" {
			return g, errors.New("--codec-token-file guards the codec server, which runs only with codec keys: add --codec-keys FILE (env REFUEL_CODEC_KEYS)")
		}
		return g, nil
	}
	if sec.CodecServer == "-" {
		return g, nil
	}
	if sec.CodecTokenFile != "" {
		if g.token, err = secretfile.Token(sec.CodecTokenFile); err != nil {
			return g, fmt.Errorf("--codec-token-file: %w", err)
		}
	}
	addr := sec.CodecServer
	if addr == "" {
		addr = codec.DefaultServerAddr
	}
	if g.codecLn, err = net.Listen("tcp", addr); err != nil {
		return g, fmt.Errorf("--codec-server %s: %w; choose another address with --codec-server, or - for none", addr, err)
	}
	scheme := "http://"
	if g.tls.Enabled() {
		// A Web UI served over HTTPS may only call an HTTPS codec server.
		scheme = "https://"
	}
	g.codecURL = scheme + dialableAddr(g.codecLn.Addr().String())
	g.uiCodec = devserver.UICodec{Endpoint: g.codecURL, IncludeCredentials: g.token != ""}
	return g, nil
}

// serveCodec serves the remote codec on the port prepareSecurity bound,
// open to the Web UI's origin, once the UI's address is known.
func (s *Stack) serveCodec(g guard) {
	if g.codecLn == nil {
		return
	}
	var origins []string
	if ui := s.UIURL(); ui != "" {
		// The browser names the UI by the host the operator typed.
		origins = append(origins, ui, strings.Replace(ui, "://127.0.0.1:", "://localhost:", 1))
	}
	srv := &http.Server{
		Handler:           codec.Handler(g.codec, codec.ServerOptions{Origins: origins, Token: g.token}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		var err error
		if g.tls.Enabled() {
			err = srv.ServeTLS(g.codecLn, g.tls.CertFile, g.tls.KeyFile)
		} else {
			err = srv.Serve(g.codecLn)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("codec server stopped", zap.Error(err))
		}
	}()
	s.codecServer = srv
	s.CodecURL = g.codecURL
	s.log.Info("codec server", zap.String("url", g.codecURL), zap.String("encrypting_key", g.codec.EncryptingKeyID()), zap.Bool("token", g.token != ""))
}

// dialableAddr turns a bind address into one a client can reach.
func dialableAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

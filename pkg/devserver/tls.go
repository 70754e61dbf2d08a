package devserver

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"go.temporal.io/server/common/config"
)

// TLS serves the frontend and the Web UI over TLS. The zero value serves
// plaintext.
type TLS struct {
	// CertFile and KeyFile are the server's certificate (PEM, with its
	// chain) and private key; both or neither.
	CertFile, KeyFile string
	// ClientCAFile, when set, requires every client of the frontend to
	// present a certificate this CA (PEM, one or more) signed: mutual TLS.
	ClientCAFile string
}

// Enabled reports whether TLS is asked for.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.ClientCAFile != "" }

// ConfigError is TLS or API-key configuration that cannot work, naming
// the flag to fix.
type ConfigError struct {
	Flag, Reason string
}

func (e *ConfigError) Error() string { return e.Flag + ": " + e.Reason }

// Validate loads everything once, so a certificate that does not match
// its key or a CA file without certificates stops the start with an error
// naming the flag, rather than a server that cannot serve.
func (t TLS) Validate() error {
	if !t.Enabled() {
		return nil
	}
	switch {
	case t.CertFile == "" && t.KeyFile == "":
		return &ConfigError{Flag: "--tls-client-ca", Reason: "mutual TLS needs the server's own certificate too: add --tls-cert FILE and --tls-key FILE"}
	case t.CertFile == "":
		return &ConfigError{Flag: "--tls-key", Reason: "given without --tls-cert: pass the certificate that goes with the key"}
	case t.KeyFile == "":
		return &ConfigError{Flag: "--tls-cert", Reason: "given without --tls-key: pass the private key that goes with the certificate"}
	}
	pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return &ConfigError{Flag: "--tls-cert/--tls-key", Reason: fmt.Sprintf("%s and %s: %v (the key must be the certificate's own, both PEM)", t.CertFile, t.KeyFile, err)}
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return &ConfigError{Flag: "--tls-cert", Reason: fmt.Sprintf("%s: %v", t.CertFile, err)}
	}
	if leaf.IsCA && len(leaf.DNSNames) == 0 && len(leaf.IPAddresses) == 0 {
		return &ConfigError{Flag: "--tls-cert", Reason: fmt.Sprintf("%s is a CA certificate naming no host; serve a certificate the CA issued for the frontend's host names or IP addresses", t.CertFile)}
	}
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return &ConfigError{Flag: "--tls-client-ca", Reason: err.Error()}
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return &ConfigError{Flag: "--tls-client-ca", Reason: fmt.Sprintf("%s holds no PEM certificate", t.ClientCAFile)}
		}
	}
	return nil
}

// serverTLS is the frontend's TLS in the server's configuration. Only the
// public frontend uses it: the services inside the process, the internal
// frontend among them, talk over loopback.
func (t TLS) serverTLS() config.RootTLS {
	if !t.Enabled() {
		return config.RootTLS{}
	}
	server := config.ServerTLS{CertFile: t.CertFile, KeyFile: t.KeyFile}
	if t.ClientCAFile != "" {
		server.ClientCAFiles = []string{t.ClientCAFile}
		server.RequireClientAuth = true
	}
	return config.RootTLS{Frontend: config.GroupTLS{Server: server}}
}

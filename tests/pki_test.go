package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// pki is a CA of a test's own and the files it issued, for TLS tests.
type pki struct {
	dir                   string
	caCert                string // the CA's certificate (PEM)
	serverCert, serverKey string // for 127.0.0.1 and localhost
	clientCert, clientKey string // a client certificate the CA signed
	otherCert, otherKey   string // a client certificate another CA signed
}

// newPKI makes a CA and certificates signed by it in a temporary
// directory, every file 0600.
func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	p := pki{dir: dir}
	ca, caKey := issue(t, "refuel test CA", nil, nil, true)
	p.caCert = writePEM(t, dir, "ca.pem", "CERTIFICATE", ca.Raw)
	server, serverKey := issue(t, "frontend", ca, caKey, false)
	p.serverCert = writePEM(t, dir, "server.pem", "CERTIFICATE", server.Raw)
	p.serverKey = writeKey(t, dir, "server-key.pem", serverKey)
	client, clientKey := issue(t, "refuel client", ca, caKey, false)
	p.clientCert = writePEM(t, dir, "client.pem", "CERTIFICATE", client.Raw)
	p.clientKey = writeKey(t, dir, "client-key.pem", clientKey)
	otherCA, otherCAKey := issue(t, "someone else's CA", nil, nil, true)
	other, otherKey := issue(t, "intruder", otherCA, otherCAKey, false)
	p.otherCert = writePEM(t, dir, "other.pem", "CERTIFICATE", other.Raw)
	p.otherKey = writeKey(t, dir, "other-key.pem", otherKey)
	return p
}

// issue makes a certificate for name, self-signed when parent is nil.
func issue(t *testing.T, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	} else {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writeKey(t *testing.T, dir, name string, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name, "EC PRIVATE KEY", der)
}

func writePEM(t *testing.T, dir, name, kind string, der []byte) string {
	t.Helper()
	return writeSecret(t, dir, name, string(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})))
}

// writeSecret writes a file only its owner may read, as secrets must be.
func writeSecret(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// codecKeyLine is a line of a codec key file with a fresh key.
func codecKeyLine(t *testing.T, id string) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return id + ":" + base64.StdEncoding.EncodeToString(key) + "\n"
}

package devserver

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/server/common/authorization"

	"refuel/internal/secretfile"
)

// minAPIKey is the shortest API key accepted: shorter ones can be guessed.
const minAPIKey = 16

// ReadAPIKeys reads an API key file: one key a line, blank lines and lines
// starting with # ignored. The file must not be readable by group or
// others. A bad line is an error naming it.
func ReadAPIKeys(path string) ([]string, error) {
	data, err := secretfile.Read(path)
	if err != nil {
		return nil, &ConfigError{Flag: "--api-key-file", Reason: fmt.Sprintf("%s: %v", path, err)}
	}
	var keys []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		key := strings.TrimSpace(sc.Text())
		if key == "" || strings.HasPrefix(key, "#") {
			continue
		}
		bad := func(reason string) error {
			return &ConfigError{Flag: "--api-key-file", Reason: fmt.Sprintf("%s line %d: %s", path, n, reason)}
		}
		if len(key) < minAPIKey {
			return nil, bad(fmt.Sprintf("a key of %d characters can be guessed; use at least %d (e.g. `openssl rand -hex 32`)", len(key), minAPIKey))
		}
		for _, r := range key {
			if r <= ' ' || r > '~' {
				return nil, bad("a key is one word of printable ASCII (it travels in an HTTP header): no spaces or other characters")
			}
		}
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, &ConfigError{Flag: "--api-key-file", Reason: fmt.Sprintf("%s: %v", path, err)}
	}
	if len(keys) == 0 {
		return nil, &ConfigError{Flag: "--api-key-file", Reason: fmt.Sprintf("%s holds no key: put one key a line in it", path)}
	}
	return keys, nil
}

// apiKeyClaims is the frontend's claim mapper with API keys: a request
// whose bearer token is one of the keys is an administrator of the whole
// cluster (refuel's clients need no finer roles), any other is refused.
// Only the keys' hashes are kept, compared in constant time.
type apiKeyClaims struct {
	sums [][sha256.Size]byte
}

var _ authorization.ClaimMapper = (*apiKeyClaims)(nil)

func newAPIKeyClaims(keys []string) *apiKeyClaims {
	m := &apiKeyClaims{}
	for _, k := range keys {
		m.sums = append(m.sums, sha256.Sum256([]byte(k)))
	}
	return m
}

var (
	errNoAPIKey      = errors.New("the request carries no API key")
	errUnknownAPIKey = errors.New("the request's API key is not one of the frontend's")
)

// GetClaims is called only for requests that carry a token or a client
// certificate; the authorizer refuses the rest, which have no claims. A
// client certificate alone is not enough: it says who connects, the key
// what they may do.
func (m *apiKeyClaims) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	if info.AuthToken == "" {
		return nil, errNoAPIKey
	}
	token, ok := bearer(info.AuthToken)
	if !ok {
		return nil, errUnknownAPIKey
	}
	sum := sha256.Sum256([]byte(token))
	found := 0
	for _, s := range m.sums {
		found |= subtle.ConstantTimeCompare(sum[:], s[:])
	}
	if found == 0 {
		return nil, errUnknownAPIKey
	}
	// The subject names the key by a fingerprint, never the key itself:
	// it shows in the server's logs and in principals.
	return &authorization.Claims{
		Subject:  "api-key:" + hex.EncodeToString(sum[:4]),
		System:   authorization.RoleAdmin,
		AuthType: "api-key",
	}, nil
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header.
func bearer(header string) (string, bool) {
	const prefix = "bearer "
	if len(header) <= len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return "", false
	}
	return header[len(prefix):], true
}

// Package codec encrypts what refuel's Temporal clients send to the
// cluster: every payload (workflow inputs and results, signals, queries,
// updates, heartbeats, memos, failure messages) is sealed with AES-256-GCM
// under a key of the operator's, so the history the server stores holds
// no JobSpec, command, checkpoint URL or stderr in the clear. Search
// attributes are not payloads of this codec: the SDK encodes them apart,
// so the server can still index and query them.
//
// The worker, every node agent and starter share one key file (--codec-keys
// FILE, env REFUEL_CODEC_KEYS). Its first key encrypts; every key in it
// decrypts, which is how keys rotate: put the new key first and keep the
// old ones until no open workflow holds payloads they sealed.
package codec

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"refuel/internal/secretfile"
)

// EnvKeys names the key file for every refuel binary when no flag does.
const EnvKeys = "REFUEL_CODEC_KEYS"

// KeySize is AES-256's key length in bytes.
const KeySize = 32

// maxKeyID bounds a key ID, which every encrypted payload carries.
const maxKeyID = 64

// Key is one AES-256 key and the ID payloads sealed with it name.
type Key struct {
	ID     string
	Secret []byte
}

// KeyFileError is a key file that cannot be used, naming the line when
// one is at fault.
type KeyFileError struct {
	Path   string
	Line   int // 0 when the file as a whole is at fault
	Reason string
}

func (e *KeyFileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("codec keys %s line %d: %s", e.Path, e.Line, e.Reason)
	}
	return fmt.Sprintf("codec keys %s: %s", e.Path, e.Reason)
}

// ReadKeys reads a key file: one key a line as ID:BASE64KEY (32 bytes of
// key, standard base64), blank lines and lines starting with # ignored.
// The file must not be readable by group or others: whoever reads it can
// read every history.
func ReadKeys(path string) ([]Key, error) {
	data, err := secretfile.Read(path)
	if err != nil {
		return nil, &KeyFileError{Path: path, Reason: err.Error()}
	}
	return ParseKeys(bytes.NewReader(data), path)
}

// ParseKeys reads keys in the key file format from r; name is the file's
// name for errors. A file without keys is an error: an operator who
// passed one meant to encrypt.
func ParseKeys(r io.Reader, name string) ([]Key, error) {
	var keys []Key
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, a ...any) error {
			return &KeyFileError{Path: name, Line: n, Reason: fmt.Sprintf(format, a...)}
		}
		id, encoded, ok := strings.Cut(line, ":")
		if !ok {
			return nil, bad("want ID:BASE64KEY, such as 2026-01:%s (make a key with `openssl rand -base64 32`)", strings.Repeat("A", 43)+"=")
		}
		if err := checkKeyID(id); err != nil {
			return nil, bad("key ID %q: %v", id, err)
		}
		if first, dup := seen[id]; dup {
			return nil, bad("key ID %q is already used on line %d: every key needs its own ID", id, first)
		}
		secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
		if err != nil {
			return nil, bad("key %q is not standard base64: %v", id, err)
		}
		if len(secret) != KeySize {
			return nil, bad("key %q is %d bytes; AES-256 needs %d (make one with `openssl rand -base64 32`)", id, len(secret), KeySize)
		}
		seen[id] = n
		keys = append(keys, Key{ID: id, Secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, &KeyFileError{Path: name, Reason: err.Error()}
	}
	if len(keys) == 0 {
		return nil, &KeyFileError{Path: name, Reason: "no keys: add a line ID:BASE64KEY, or pass no key file to run without encryption"}
	}
	return keys, nil
}

// checkKeyID keeps IDs short and printable: they travel in every payload's
// metadata and in error messages.
func checkKeyID(id string) error {
	if id == "" {
		return errors.New("empty")
	}
	if len(id) > maxKeyID {
		return fmt.Errorf("longer than %d characters", maxKeyID)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r)) {
			return fmt.Errorf("%q is not allowed: use letters, digits, '.', '_' and '-'", r)
		}
	}
	return nil
}

// Package secretfile reads the files refuel keeps secrets in (codec keys,
// API keys, tokens), refusing one that other users may read.
package secretfile

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Read returns the file's content. A file that group or others may read
// is an error: a secret readable by every user of the machine protects
// nothing, and saying so at start beats finding out after a leak.
func Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("mode %04o lets other users read it; run `chmod 600 %s`", perm, path)
	}
	return io.ReadAll(f)
}

// minToken is the shortest token accepted: shorter ones can be guessed.
const minToken = 16

// Token reads a file holding one token on one line.
func Token(path string) (string, error) {
	data, err := Read(path)
	if err != nil {
		return "", fmt.Errorf("token %s: %w", path, err)
	}
	token := strings.TrimSpace(string(data))
	switch {
	case token == "":
		return "", fmt.Errorf("token %s: the file is empty; put one token in it (e.g. `openssl rand -hex 32 > %s`)", path, path)
	case strings.ContainsAny(token, " \t\r\n"):
		return "", fmt.Errorf("token %s: want one token on one line, without spaces", path)
	case len(token) < minToken:
		return "", fmt.Errorf("token %s: %d characters can be guessed; use at least %d (e.g. `openssl rand -hex 32`)", path, len(token), minToken)
	}
	return token, nil
}

// Package secretfile reads the files refuel keeps secrets in (codec keys,
// API keys, tokens), refusing one that other users may read.
package secretfile

import (
	"fmt"
	"io"
	"os"
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

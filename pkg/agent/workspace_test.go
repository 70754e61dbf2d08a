package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A workspace survives the trip through an archive: files with their
// modes and times, empty and read-only directories, links; and
// extracting replaces what the directory held.
func TestArchiveRoundTrip(t *testing.T) {
	src := t.TempDir()
	mtime := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	must(os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
	must(os.MkdirAll(filepath.Join(src, "empty"), 0o700))
	must(os.WriteFile(filepath.Join(src, "a", "b", "data.bin"), bytes.Repeat([]byte{7}, 100_000), 0o600))
	must(os.WriteFile(filepath.Join(src, "tool"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Chtimes(filepath.Join(src, "tool"), mtime, mtime))
	must(os.Symlink("a/b/data.bin", filepath.Join(src, "data")))
	must(os.Symlink("/etc/hostname", filepath.Join(src, "outside")))
	must(os.MkdirAll(filepath.Join(src, "ro"), 0o755))
	must(os.WriteFile(filepath.Join(src, "ro", "kept"), []byte("k"), 0o644))
	must(os.Chmod(filepath.Join(src, "ro"), 0o555))
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "ro"), 0o755) })

	var buf bytes.Buffer
	st, err := writeArchive(context.Background(), src, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if st.files != 3 || st.dirs != 4 || st.links != 2 || st.bytes != 100_000+10+1 {
		t.Errorf("archived %s; want 3 files, 4 directories, 2 links, 100011 bytes", st)
	}
	archive := filepath.Join(t.TempDir(), WorkspaceArchive)
	must(os.WriteFile(archive, buf.Bytes(), 0o600))

	dst := t.TempDir()
	must(os.WriteFile(filepath.Join(dst, "stale"), []byte("from before"), 0o600))
	if _, err := extractArchive(archive, dst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dst, "ro"), 0o755) })
	if _, err := os.Stat(filepath.Join(dst, "stale")); !os.IsNotExist(err) {
		t.Errorf("a file the save did not have is still there (%v)", err)
	}
	if a, b := listing(t, src), listing(t, dst); a != b {
		t.Errorf("the extracted workspace differs from the saved one:\n%s\n%s", a, b)
	}
}

// listing is every entry under dir, relative to it, with its mode, size,
// time (a link's own time is not kept) and target.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		target, _ := os.Readlink(p)
		size, mod := fi.Size(), fi.ModTime().UTC().Format(time.RFC3339Nano)
		if fi.IsDir() {
			size = 0
		}
		if target != "" {
			mod = ""
		}
		fmt.Fprintf(&b, "%s %s %d %s %s\n", rel, fi.Mode(), size, mod, target)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// An archive cannot write outside the workspace: not by its paths, not
// through a link it lays first.
func TestExtractStaysInTheWorkspace(t *testing.T) {
	outside := t.TempDir()
	cases := map[string][]*tar.Header{
		"a path that climbs out": {{Name: "../escaped", Typeflag: tar.TypeReg, Mode: 0o600}},
		"an absolute path":       {{Name: "/" + filepath.Join(outside, "escaped"), Typeflag: tar.TypeReg, Mode: 0o600}},
		"through a link": {
			{Name: "out", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "out/escaped", Typeflag: tar.TypeReg, Mode: 0o600},
		},
		"through a relative link": {
			{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "../../../../../../../.."},
			{Name: "up" + outside + "/escaped", Typeflag: tar.TypeReg, Mode: 0o600},
		},
	}
	for name, hdrs := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			for _, h := range hdrs {
				must(tw.WriteHeader(h))
			}
			must(tw.Close())
			must(zw.Close())
			archive := filepath.Join(t.TempDir(), WorkspaceArchive)
			must(os.WriteFile(archive, buf.Bytes(), 0o600))
			if _, err := extractArchive(archive, t.TempDir()); err == nil {
				t.Error("extracted; want an error")
			}
			if _, err := os.Stat(filepath.Join(outside, "escaped")); !os.IsNotExist(err) {
				t.Errorf("a file was written outside the workspace (%v)", err)
			}
		})
	}
}

// A file that grows or shrinks while it is archived keeps the size the
// walk saw, and the archive stays readable.
func TestArchiveOfAFileChangingSize(t *testing.T) {
	src := t.TempDir()
	p := filepath.Join(src, "log")
	must(os.WriteFile(p, []byte("0123456789"), 0o600))
	hdr := &tar.Header{Name: "log", Mode: 0o600}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	must(os.WriteFile(p, []byte("01234"), 0o600)) // shrank since the walk saw 10 bytes
	n, err := writeFile(tw, hdr, p, 10)
	if err != nil || n != 10 {
		t.Fatalf("wrote %d, %v; want the 10 bytes the header promised", n, err)
	}
	must(tw.Close())
	tr := tar.NewReader(&buf)
	if h, err := tr.Next(); err != nil || h.Size != 10 {
		t.Fatalf("read back %+v, %v", h, err)
	}
}

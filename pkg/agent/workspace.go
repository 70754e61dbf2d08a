package agent

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"
)

// WorkspaceArchive is the one file of a workspace save: the workspace
// as a gzip-compressed tar archive. A save is a checkpoint of the
// environment's store (step-<N>/data/workspace.tar.gz, then its manifest
// with the archive's sha256), so it is uploaded, verified and pruned as
// a run's checkpoints are.
const WorkspaceArchive = "workspace.tar.gz"

// archiveStats is what an archive holds.
type archiveStats struct {
	files, dirs, links int
	bytes              int64
	// skipped are entries no archive keeps: sockets, pipes, devices.
	skipped int
}

func (s archiveStats) String() string {
	out := fmt.Sprintf("%d files, %d directories, %d links, %d bytes", s.files, s.dirs, s.links, s.bytes)
	if s.skipped > 0 {
		out += fmt.Sprintf(" (%d sockets, pipes or devices left out)", s.skipped)
	}
	return out
}

// writeArchive writes the workspace dir into w as a tar.gz archive:
// directories, regular files and symbolic links, with their modes and
// modification times, relative to dir. A file that changes while it is
// read keeps the size it had when the walk reached it (cut, or padded
// with zeros): the next save has it whole. One that vanishes is left
// out. ctx bounds the work, checked between files.
func writeArchive(ctx context.Context, dir string, w io.Writer) (archiveStats, error) {
	var st archiveStats
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return st, err
	}
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone since the walk listed it
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			st.dirs++
			return tw.WriteHeader(hdr)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return ignoreGone(err)
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
			st.links++
			return tw.WriteHeader(hdr)
		case fi.Mode().IsRegular():
			n, err := writeFile(tw, hdr, p, fi.Size())
			if err != nil {
				return err
			}
			st.files++
			st.bytes += n
			return nil
		}
		st.skipped++
		return nil
	})
	if err != nil {
		return st, err
	}
	if err := tw.Close(); err != nil {
		return st, err
	}
	return st, zw.Close()
}

// writeFile adds one regular file of the size the walk saw; a file gone
// since adds nothing.
func writeFile(tw *tar.Writer, hdr *tar.Header, p string, size int64) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, ignoreGone(err)
	}
	defer f.Close()
	hdr.Typeflag, hdr.Size = tar.TypeReg, size
	if err := tw.WriteHeader(hdr); err != nil {
		return 0, err
	}
	n, err := io.CopyN(tw, f, size)
	if errors.Is(err, io.EOF) {
		// Shorter now than when listed: pad, as the header promised.
		_, err = io.CopyN(tw, zeros{}, size-n)
	}
	return size, err
}

func ignoreGone(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// extractArchive empties dir and lays the archive's entries into it,
// confined to dir: an entry whose path leaves it, or that would be
// written through a symbolic link leading out, is an error. Directories
// get their modes once everything is in them, so a read-only directory
// of the workspace can still be filled.
func extractArchive(archive, dir string) (archiveStats, error) {
	var st archiveStats
	f, err := os.Open(archive)
	if err != nil {
		return st, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return st, fmt.Errorf("%s: %w", archive, err)
	}
	if err := emptyDir(dir); err != nil {
		return st, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return st, err
	}
	defer root.Close()
	type dirMode struct {
		name string
		mode fs.FileMode
		mod  time.Time
	}
	var dirs []dirMode
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, fmt.Errorf("%s: %w", archive, err)
		}
		name := path.Clean(hdr.Name)
		if !filepath.IsLocal(filepath.FromSlash(name)) {
			return st, fmt.Errorf("%s: entry %q leaves the workspace", archive, hdr.Name)
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		if parent := path.Dir(name); parent != "." {
			if err := root.MkdirAll(parent, 0o700); err != nil {
				return st, err
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o700); err != nil {
				return st, err
			}
			dirs = append(dirs, dirMode{name, mode, hdr.ModTime})
			st.dirs++
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return st, err
			}
			st.links++
		case tar.TypeReg:
			if err := extractFile(root, name, mode, tr); err != nil {
				return st, err
			}
			if err := root.Chtimes(name, hdr.ModTime, hdr.ModTime); err != nil {
				return st, err
			}
			st.files++
			st.bytes += hdr.Size
		default:
			st.skipped++
		}
	}
	// Deepest first, so setting a directory's time comes after its
	// entries changed it.
	for _, d := range slices.Backward(dirs) {
		if err := root.Chmod(d.name, d.mode); err != nil {
			return st, err
		}
		if err := root.Chtimes(d.name, d.mod, d.mod); err != nil {
			return st, err
		}
	}
	return st, nil
}

func extractFile(root *os.Root, name string, mode fs.FileMode, r io.Reader) error {
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// The mode as archived, whatever the umask made of it.
	return root.Chmod(name, mode)
}

// emptyDir removes everything in dir, creating it (0700) if it is
// missing, but keeps dir itself: it may be a mount point.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// fingerprint sums what a save of dir would hold, without reading a
// file: every entry's path, type, mode, size, modification time and
// link target. Saves are skipped while it stays the same.
func fingerprint(dir string) ([sha256.Size]byte, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return ignoreGone(err)
		}
		fi, err := d.Info()
		if err != nil {
			return ignoreGone(err)
		}
		target := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ = os.Readlink(p)
		}
		fmt.Fprintf(h, "%q %v %d %d %q\n", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), target)
		return nil
	})
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum, err
}

package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// memTests numbers the tests' mem:// buckets.
var memTests atomic.Int64

// schemes are the buckets every test runs against.
var schemes = []string{"mem", "file"}

// openStore opens an empty store for job "job-1" on the given scheme.
func openStore(t *testing.T, scheme string) *Store {
	t.Helper()
	// mem:// buckets are the process's, by URL: each test takes its own.
	bucketURL := "mem://" + strconv.FormatInt(memTests.Add(1), 10)
	if scheme == "file" {
		bucketURL = (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(t.TempDir(), "bucket"))}).String()
	}
	s, err := Open(context.Background(), bucketURL, "job-1")
	if err != nil {
		t.Fatalf("Open(%s): %v", bucketURL, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// writeTree creates files (slash paths to contents) under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// readTree returns every regular file under dir, as writeTree takes them.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, err := regularFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		files[p] = string(b)
	}
	return files
}

func save(t *testing.T, s *Store, step int64, files map[string]string) Manifest {
	t.Helper()
	m, err := s.Save(context.Background(), step, writeTree(t, files), "i-test")
	if err != nil {
		t.Fatalf("Save(%d): %v", step, err)
	}
	return m
}

func TestSaveLatestRestoreRoundTrip(t *testing.T) {
	binary := string([]byte{0, 1, 2, 0xff, 0xfe, '\n', '\r', 0})
	files := map[string]string{
		"model.bin":            strings.Repeat(binary, 10000),
		"optimizer/state.bin":  "adam",
		"optimizer/deep/x.txt": "nested",
		"empty":                "",
	}
	for _, scheme := range schemes {
		t.Run(scheme, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t, scheme)
			save(t, s, 3, map[string]string{"model.bin": "older"})
			saved := save(t, s, 10, files)

			latest, err := s.Latest(ctx)
			if err != nil {
				t.Fatalf("Latest: %v", err)
			}
			if diff := cmp.Diff(saved, latest); diff != "" {
				t.Errorf("Latest (-saved +latest):\n%s", diff)
			}
			wantPaths := []string{"empty", "model.bin", "optimizer/deep/x.txt", "optimizer/state.bin"}
			var gotPaths []string
			for _, f := range latest.Files {
				gotPaths = append(gotPaths, f.Path)
			}
			if diff := cmp.Diff(wantPaths, gotPaths); diff != "" {
				t.Errorf("manifest paths (-want +got):\n%s", diff)
			}
			if latest.JobID != "job-1" || latest.Step != 10 || latest.InstanceID != "i-test" || latest.CreatedAt.IsZero() {
				t.Errorf("manifest header = %+v", latest)
			}

			dst := filepath.Join(t.TempDir(), "restore", "step-10")
			if err := s.Restore(ctx, latest, dst); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if diff := cmp.Diff(files, readTree(t, dst)); diff != "" {
				t.Errorf("restored tree (-saved +restored):\n%s", diff)
			}
		})
	}
}

func TestSaveWritesManifestLast(t *testing.T) {
	s := openStore(t, "mem")
	m := save(t, s, 7, map[string]string{"a": "1", "b/c": "2"})
	// The layout is a contract with operators browsing the bucket.
	for _, key := range []string{
		"step-000000000007/data/a",
		"step-000000000007/data/b/c",
		"step-000000000007/manifest.json",
	} {
		ok, err := s.bucket.Exists(context.Background(), key)
		if err != nil || !ok {
			t.Errorf("Exists(%s) = %v, %v; want true", key, ok, err)
		}
	}
	raw, err := s.bucket.ReadAll(context.Background(), "step-000000000007/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"job_id"`, `"step"`, `"created_at"`, `"instance_id"`, `"files"`, `"path"`, `"size"`, `"sha256"`} {
		if !strings.Contains(string(raw), field) {
			t.Errorf("manifest lacks %s:\n%s", field, raw)
		}
	}
	if m.Files[0].SHA256 != "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b" {
		t.Errorf("sha256 of %q = %s", "1", m.Files[0].SHA256)
	}
}

func TestLatestSkipsBadCheckpoints(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		// spoil damages step 2 after it was saved.
		spoil      func(t *testing.T, s *Store)
		wantReason string
	}{
		"data without manifest": {
			spoil: func(t *testing.T, s *Store) {
				mustDelete(t, s, "step-000000000002/manifest.json")
			},
			wantReason: "missing",
		},
		"altered data": {
			spoil: func(t *testing.T, s *Store) {
				mustWrite(t, s, "step-000000000002/data/weights", "WEIGHTS-2")
			},
			wantReason: "sha256",
		},
		"truncated data": {
			spoil: func(t *testing.T, s *Store) {
				mustWrite(t, s, "step-000000000002/data/weights", "wei")
			},
			wantReason: "size",
		},
		"missing file": {
			spoil: func(t *testing.T, s *Store) {
				mustDelete(t, s, "step-000000000002/data/nested/x")
			},
			wantReason: "missing",
		},
		"unreadable manifest": {
			spoil: func(t *testing.T, s *Store) {
				mustWrite(t, s, "step-000000000002/manifest.json", "{not json")
			},
			wantReason: "invalid character",
		},
		"manifest of another step": {
			spoil: func(t *testing.T, s *Store) {
				raw, err := s.bucket.ReadAll(ctx, "step-000000000001/manifest.json")
				if err != nil {
					t.Fatal(err)
				}
				mustWrite(t, s, "step-000000000002/manifest.json", string(raw))
			},
			wantReason: "names job",
		},
		"manifest escaping the checkpoint": {
			spoil: func(t *testing.T, s *Store) {
				m := save(t, s, 3, map[string]string{"weights": "x"})
				m.Files[0].Path = "../step-000000000001/data/weights"
				mustWrite(t, s, "step-000000000003/manifest.json", mustJSON(t, m))
				mustDelete(t, s, "step-000000000002/manifest.json")
			},
			wantReason: "leaves",
		},
	}
	for name, tc := range cases {
		for _, scheme := range schemes {
			t.Run(name+"/"+scheme, func(t *testing.T) {
				s := openStore(t, scheme)
				good := save(t, s, 1, map[string]string{"weights": "weights-1", "nested/x": "1"})
				save(t, s, 2, map[string]string{"weights": "weights-2", "nested/x": "2"})
				tc.spoil(t, s)

				latest, err := s.Latest(ctx)
				if err != nil {
					t.Fatalf("Latest: %v", err)
				}
				if diff := cmp.Diff(good, latest); diff != "" {
					t.Errorf("Latest (-want +got):\n%s", diff)
				}
				// With the good one gone too, the skipped ones are reported.
				mustDelete(t, s, "step-000000000001/manifest.json")
				_, err = s.Latest(ctx)
				var notFound *NotFoundError
				if !errors.As(err, &notFound) {
					t.Fatalf("Latest after losing step 1 = %v, want *NotFoundError", err)
				}
				var reasons []string
				for _, c := range notFound.Skipped {
					reasons = append(reasons, c.Reason)
				}
				if !strings.Contains(strings.Join(reasons, "|"), tc.wantReason) {
					t.Errorf("skipped reasons %q, want one with %q", reasons, tc.wantReason)
				}
			})
		}
	}
}

func TestLatestEmptyStore(t *testing.T) {
	for _, scheme := range schemes {
		t.Run(scheme, func(t *testing.T) {
			s := openStore(t, scheme)
			_, err := s.Latest(context.Background())
			var notFound *NotFoundError
			if !errors.As(err, &notFound) {
				t.Fatalf("Latest = %v, want *NotFoundError", err)
			}
			if len(notFound.Skipped) != 0 || !strings.Contains(err.Error(), s.URL()) {
				t.Errorf("error = %v (skipped %d), want none skipped and the URL", err, len(notFound.Skipped))
			}
			ms, err := s.List(context.Background())
			if err != nil || len(ms) != 0 {
				t.Errorf("List = %v, %v; want nothing", ms, err)
			}
		})
	}
}

func TestListNewestFirstUnverified(t *testing.T) {
	s := openStore(t, "mem")
	for _, step := range []int64{5, 1000000000000, 20} {
		save(t, s, step, map[string]string{"w": "x"})
	}
	mustWrite(t, s, "step-000000000020/data/w", "corrupt")
	mustWrite(t, s, "step-000000000030/data/w", "no manifest")
	ms, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, m := range ms {
		steps = append(steps, m.Step)
	}
	if diff := cmp.Diff([]int64{1000000000000, 20, 5}, steps); diff != "" {
		t.Errorf("List steps (-want +got):\n%s", diff)
	}
}

func TestVerifyNamesFile(t *testing.T) {
	s := openStore(t, "mem")
	m := save(t, s, 1, map[string]string{"a": "aaa", "b": "bbb"})
	if err := s.Verify(context.Background(), m); err != nil {
		t.Fatalf("Verify good: %v", err)
	}
	mustWrite(t, s, "step-000000000001/data/b", "BBB")
	err := s.Verify(context.Background(), m)
	var corrupt *CorruptError
	if !errors.As(err, &corrupt) || corrupt.File != "b" || corrupt.Step != 1 {
		t.Fatalf("Verify = %v, want *CorruptError for step 1 file b", err)
	}
}

func TestRestoreCorruptRemovesWhatItWrote(t *testing.T) {
	for _, scheme := range schemes {
		t.Run(scheme, func(t *testing.T) {
			s := openStore(t, scheme)
			m := save(t, s, 1, map[string]string{"a/1": "one", "b/2": "two", "c/3": "three"})
			mustWrite(t, s, "step-000000000001/data/b/2", "TWO")

			parent := writeTree(t, map[string]string{"keep": "mine"})
			dst := filepath.Join(parent, "x", "step-1")
			err := s.Restore(context.Background(), m, dst)
			var corrupt *CorruptError
			if !errors.As(err, &corrupt) || corrupt.File != "b/2" {
				t.Fatalf("Restore = %v, want *CorruptError for b/2", err)
			}
			if diff := cmp.Diff(map[string]string{"keep": "mine"}, readTree(t, parent)); diff != "" {
				t.Errorf("left behind (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(filepath.Join(parent, "x")); !os.IsNotExist(err) {
				t.Errorf("directory made by Restore still there: %v", err)
			}
		})
	}
}

func TestPrune(t *testing.T) {
	cases := map[string]struct {
		good       []int64
		incomplete []int64 // data without a manifest
		corrupt    []int64 // manifest with altered data
		keep       int
		wantGone   []int64
		wantLeft   []int64 // step prefixes still in the bucket
	}{
		"keep two": {
			good: []int64{1, 2, 3, 4, 5}, keep: 2,
			wantGone: []int64{3, 2, 1}, wantLeft: []int64{5, 4},
		},
		"keep more than there are": {
			good: []int64{1, 2}, keep: 5,
			wantLeft: []int64{2, 1},
		},
		"keep zero still keeps the newest good": {
			good: []int64{1, 2}, keep: 0,
			wantGone: []int64{1}, wantLeft: []int64{2},
		},
		"bad steps older than the newest good go, newer stay": {
			good: []int64{2, 4}, incomplete: []int64{3, 6}, corrupt: []int64{1, 5}, keep: 1,
			wantGone: []int64{3, 2, 1}, wantLeft: []int64{6, 5, 4},
		},
		"corrupt checkpoints do not count as kept": {
			good: []int64{1, 2}, corrupt: []int64{3}, keep: 2,
			wantLeft: []int64{3, 2, 1},
		},
		"nothing good deletes nothing": {
			incomplete: []int64{1, 2}, corrupt: []int64{3}, keep: 1,
			wantLeft: []int64{3, 2, 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.ToSlash(t.TempDir())
			s, err := Open(ctx, "file://"+dir, "job-1")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, step := range tc.good {
				save(t, s, step, map[string]string{"w": "good", "n/x": "y"})
			}
			for _, step := range tc.incomplete {
				mustWrite(t, s, dataKey(step, "w"), "partial")
			}
			for _, step := range tc.corrupt {
				save(t, s, step, map[string]string{"w": "good"})
				mustWrite(t, s, dataKey(step, "w"), "evil")
			}
			// A fresh Store, as another agent would have, trusts nothing.
			other, err := Open(ctx, "file://"+dir, "job-1")
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()

			gone, err := other.Prune(ctx, tc.keep)
			if err != nil {
				t.Fatalf("Prune: %v", err)
			}
			if diff := cmp.Diff(tc.wantGone, gone); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			left, err := other.steps(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLeft, left); diff != "" {
				t.Errorf("left (-want +got):\n%s", diff)
			}
			// No empty step-N/data directories stay behind on disk.
			for _, step := range gone {
				if _, err := os.Stat(filepath.Join(dir, "job-1", stepDir(step))); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("step %d's directory stays: %v", step, err)
				}
			}
		})
	}
}

func TestOpenErrorsNameTheURL(t *testing.T) {
	cases := map[string]struct {
		url, jobID string
		want       string
	}{
		"unsupported scheme": {url: "ftp://host/dir", jobID: "j", want: "ftp://host/dir"},
		"bad file option":    {url: "file:///tmp/x?nope=1", jobID: "j", want: "file:///tmp/x?nope=1"},
		"empty job":          {url: "mem://", jobID: "", want: "job id"},
		"job with slash":     {url: "mem://", jobID: "a/b", want: "job id"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Open(context.Background(), tc.url, tc.jobID)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestURL(t *testing.T) {
	dir := filepath.ToSlash(t.TempDir())
	cases := map[string]string{
		"mem://":              "mem:///job-1/",
		"mem://?nomd5=true":   "mem:///job-1/?nomd5=true",
		"file://" + dir:       "file://" + dir + "/job-1/",
		"file://" + dir + "/": "file://" + dir + "/job-1/",
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			s, err := Open(context.Background(), in, "job-1")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.URL(); got != want {
				t.Errorf("URL() = %q, want %q", got, want)
			}
		})
	}
}

func mustWrite(t *testing.T, s *Store, key, content string) {
	t.Helper()
	if err := s.bucket.WriteAll(context.Background(), key, []byte(content), nil); err != nil {
		t.Fatal(err)
	}
}

func mustDelete(t *testing.T, s *Store, key string) {
	t.Helper()
	if err := s.bucket.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, m Manifest) string {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestStepURLKeepsTheQuery(t *testing.T) {
	s := &Store{url: "s3://bucket/job/?region=eu-west-1"}
	if got, want := s.StepURL(7), "s3://bucket/job/step-000000000007?region=eu-west-1"; got != want {
		t.Errorf("StepURL = %q; want %q", got, want)
	}
}

// TestFileStoreIsPrivate: in a file:// bucket every checkpoint file is
// 0600 in 0700 directories, and so is what Restore writes, whatever the
// trainer's own modes were; nothing but the objects is left there.
func TestFileStoreIsPrivate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "bucket")
	s, err := Open(context.Background(), (&url.URL{Scheme: "file", Path: filepath.ToSlash(root)}).String(), "job-1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := save(t, s, 7, map[string]string{"model.bin": "weights", "opt/state.json": "{}"})
	restored := filepath.Join(t.TempDir(), "restored")
	if err := s.Restore(context.Background(), m, restored); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, dir := range []string{root, restored} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			want := os.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			} else {
				files = append(files, strings.TrimPrefix(p, dir))
			}
			if p != restored && info.Mode().Perm() != want {
				t.Errorf("%s: mode %04o, want %04o", p, info.Mode().Perm(), want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(files)
	want := []string{"/job-1/step-000000000007/data/model.bin", "/job-1/step-000000000007/data/opt/state.json", "/job-1/step-000000000007/manifest.json", "/model.bin", "/opt/state.json"}
	if !slices.Equal(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}
}

// TestMemIsOneBucketPerURL checks that mem:// stores of one URL share
// their checkpoints within the process, as a virtual instance's agent and
// its replacement's must, and outlive a Close; other URLs are apart.
func TestMemIsOneBucketPerURL(t *testing.T) {
	ctx := context.Background()
	first, err := Open(ctx, "mem://shared", "job-m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Save(ctx, 7, writeTree(t, map[string]string{"w": "seven"}), "i-1"); err != nil {
		t.Fatal(err)
	}
	first.Close()
	for url, want := range map[string][]int64{"mem://shared": {7}, "mem://other": nil} {
		s, err := Open(ctx, url, "job-m")
		if err != nil {
			t.Fatal(err)
		}
		ms, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, m := range ms {
			got = append(got, m.Step)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s after another store's Close (-want +got):\n%s", url, diff)
		}
		s.Close()
	}
}

// A file store that several nodes share is written while it is listed:
// a rank's restore lists the steps, and a person follows the output,
// while rank 0 uploads its output, saves and prunes. A file renamed or
// deleted under the listing does not fail it.
func TestListWhileTheStoreIsWritten(t *testing.T) {
	s := openStore(t, "file")
	ctx := context.Background()
	tree := writeTree(t, map[string]string{"w": "x", "more/w": "y"})
	for _, step := range []int64{1, 2} {
		if _, err := s.Save(ctx, step, tree, "i-0"); err != nil {
			t.Fatal(err)
		}
	}
	var stopped atomic.Bool
	done := make(chan error)
	go func() {
		var err error
		for i := 1; err == nil && !stopped.Load(); i++ {
			seg := LogSegment{Attempt: 1, Instance: "i-0", Index: i}
			step := int64(100 + i)
			err = errors.Join(s.PutLogSegment(ctx, seg, []byte("out")), s.DeleteLogSegment(ctx, seg))
			if _, serr := s.Save(ctx, step, tree, "i-0"); serr != nil {
				err = serr
			}
			err = errors.Join(err, s.deleteStep(ctx, step))
		}
		done <- err
	}()
	for range 200 {
		ms, err := s.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if n := len(ms); n < 2 || ms[n-2].Step != 2 || ms[n-1].Step != 1 {
			t.Fatalf("List: %+v; want steps 2 and 1 last", ms)
		}
		if _, err := s.LogSegments(ctx); err != nil {
			t.Fatalf("LogSegments: %v", err)
		}
	}
	stopped.Store(true)
	if err := <-done; err != nil {
		t.Fatalf("the writer: %v", err)
	}
}

package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"gocloud.dev/blob"
	// The schemes a checkpoint URL may use.
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"refuel/pkg/listing"
)

// Store holds the checkpoints of one job in one bucket. It is safe for
// concurrent use.
type Store struct {
	bucket *blob.Bucket
	jobID  string
	url    string
	// bucketURL is what the store was opened with, for the stores of
	// shards beside it.
	bucketURL string
	// shared is set for a mem:// bucket, which outlives the Store.
	shared bool
	// run is the identity of the run whose checkpoints the store saves
	// (see SetRun); "" for none.
	run string

	mu sync.Mutex
	// trusted maps a step to the hash of the manifest this Store wrote or
	// fully verified for it, so Prune need not download the same data again
	// after every save. Latest and Verify never use it: they always read.
	trusted map[int64][sha256.Size]byte
}

// Open opens the bucket at bucketURL for the checkpoints of jobID. A file://
// directory is created if missing (0700: checkpoints are the job's alone),
// with temporary files beside their objects rather than in a shared temp
// directory and no metadata files; other buckets must exist.
func Open(ctx context.Context, bucketURL, jobID string) (*Store, error) {
	if jobID == "" || strings.Contains(jobID, "/") || jobID == "." || jobID == ".." {
		return nil, fmt.Errorf("checkpoint: invalid job id %q", jobID)
	}
	return open(ctx, bucketURL, jobID, jobID+"/")
}

// SetRun names the run whose checkpoints the store saves: each manifest
// it writes says so, and the node agent restores none another run of the
// same job id wrote (*ForeignRunError). Call it before using the store.
func (s *Store) SetRun(run string) { s.run = run }

// Run is the run SetRun named; "" for none.
func (s *Store) Run() string { return s.run }

// open opens the bucket at bucketURL for the checkpoints of jobID kept
// under prefix: the job's own, or a rank's shards beside them.
func open(ctx context.Context, bucketURL, jobID, prefix string) (*Store, error) {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: bad bucket URL %q: %w", bucketURL, err)
	}
	openURL := bucketURL
	if u.Scheme == "file" {
		q := u.Query()
		for k, v := range map[string]string{"create_dir": "true", "dir_file_mode": "0700", "no_tmp_dir": "true", "metadata": "skip"} {
			if !q.Has(k) {
				q.Set(k, v)
			}
		}
		v := *u
		v.RawQuery = q.Encode()
		openURL = v.String()
	}
	if u.Scheme == "mem" {
		b, err := memBucket(ctx, u, prefix)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: open bucket %s: %w", bucketURL, err)
		}
		return newStore(b, u, bucketURL, jobID, prefix, true), nil
	}
	b, err := blob.OpenBucket(ctx, openURL)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open bucket %s: %w", bucketURL, err)
	}
	b = blob.PrefixedBucket(b, prefix)
	// Drivers such as s3blob open lazily; ask once now so a wrong bucket
	// name or missing credentials show up here, naming the URL. Listing
	// only the job's prefix needs no more permission than the store does.
	ok, err := b.IsAccessible(ctx)
	if err == nil && !ok {
		err = errors.New("bucket does not exist")
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("checkpoint: open bucket %s: %w", bucketURL, err)
	}
	return newStore(b, u, bucketURL, jobID, prefix, false), nil
}

func newStore(b *blob.Bucket, u *url.URL, bucketURL, jobID, prefix string, shared bool) *Store {
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + prefix
	return &Store{
		bucket:    b,
		jobID:     jobID,
		url:       u.String(),
		bucketURL: bucketURL,
		shared:    shared,
		trusted:   map[int64][sha256.Size]byte{},
	}
}

// memBuckets are this process's mem:// buckets, one per URL and job, so
// that every Open of the same URL sees the same checkpoints, as for any
// other scheme: the agent of an instance hosted in this process, its
// replacement's, the control plane's checks. They live as long as the
// process.
var memBuckets = struct {
	sync.Mutex
	m map[string]*blob.Bucket
}{m: map[string]*blob.Bucket{}}

func memBucket(ctx context.Context, u *url.URL, prefix string) (*blob.Bucket, error) {
	key := u.Host + u.Path + "?" + u.RawQuery + "#" + prefix
	memBuckets.Lock()
	defer memBuckets.Unlock()
	if b, ok := memBuckets.m[key]; ok {
		return b, nil
	}
	b, err := blob.OpenBucket(ctx, (&url.URL{Scheme: "mem", RawQuery: u.RawQuery}).String())
	if err != nil {
		return nil, err
	}
	b = blob.PrefixedBucket(b, prefix)
	memBuckets.m[key] = b
	return b, nil
}

// Close releases the bucket; a mem:// one stays for the next Open.
func (s *Store) Close() error {
	if s.shared {
		return nil
	}
	return s.bucket.Close()
}

// URL is where this job's checkpoints live, for status and logs.
func (s *Store) URL() string { return s.url }

// List returns every checkpoint that has a readable manifest, newest first.
// Their data is not verified.
func (s *Store) List(ctx context.Context) ([]Manifest, error) {
	steps, err := s.steps(ctx)
	if err != nil {
		return nil, err
	}
	var ms []Manifest
	for _, step := range steps {
		m, _, err := s.readManifest(ctx, step)
		var corrupt *CorruptError
		if errors.As(err, &corrupt) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// steps lists the step prefixes present in the bucket, complete or not,
// newest first. Only the steps are listed: the job's output and its
// ranks' shards are written to while a rank restores.
func (s *Store) steps(ctx context.Context) ([]int64, error) {
	objs, err := listing.All(ctx, s.bucket, &blob.ListOptions{Prefix: stepPrefix, Delimiter: "/"})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %s: %w", s.url, err)
	}
	var steps []int64
	for _, obj := range objs {
		if !obj.IsDir {
			continue
		}
		if step, ok := parseStepDir(strings.TrimSuffix(obj.Key, "/")); ok {
			steps = append(steps, step)
		}
	}
	slices.Sort(steps)
	slices.Reverse(steps)
	return steps, nil
}

// readManifest reads a step's manifest and the hash of its bytes. A missing
// or malformed manifest is a *CorruptError; any other error is the bucket's.
func (s *Store) readManifest(ctx context.Context, step int64) (Manifest, [sha256.Size]byte, error) {
	raw, err := s.bucket.ReadAll(ctx, manifestKey(step))
	if gcerrors.Code(err) == gcerrors.NotFound {
		return Manifest{}, [sha256.Size]byte{}, &CorruptError{Step: step, File: manifestName, Reason: "missing (upload incomplete)"}
	}
	if err != nil {
		return Manifest{}, [sha256.Size]byte{}, fmt.Errorf("checkpoint: read manifest of step %d: %w", step, err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Manifest{}, [sha256.Size]byte{}, &CorruptError{Step: step, File: manifestName, Reason: err.Error()}
	}
	if m.Step != step || m.JobID != s.jobID {
		return Manifest{}, [sha256.Size]byte{}, &CorruptError{Step: step, File: manifestName, Reason: fmt.Sprintf("names job %q step %d", m.JobID, m.Step)}
	}
	return m, sha256.Sum256(raw), nil
}

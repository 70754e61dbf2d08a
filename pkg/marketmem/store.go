package marketmem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	// The schemes a market memory URL may use.
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"refuel/pkg/listing"
	"refuel/pkg/policy"
)

// Options tune a Store; the zero value is what a worker uses.
type Options struct {
	// Writer names this writer's shard; default a name of its own per
	// Open (the host's name and a random suffix), so no two processes
	// ever write one shard.
	Writer string
	// Fresh is how long a read of the other writers' shards is trusted
	// before the next call reads them again; default 10s. A change this
	// writer is about to make (an outage begun or ended) always reads
	// them first.
	Fresh time.Duration
	// Idle is how long a shard may go unwritten before a live writer
	// takes it over as a writer gone; default 24h.
	Idle time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Store is one writer's handle on a deployment's market memory. Safe for
// concurrent use.
type Store struct {
	bucket *blob.Bucket // the deployment's prefix
	owned  bool         // Close closes the bucket
	where  string       // the memory, for errors
	opts   Options

	mu      sync.Mutex
	own     Shard
	others  []Shard
	view    View
	readAt  time.Time // when others were read; zero: never
	wroteAt time.Time // when own was last written; zero: never
}

// Open opens the memory of deployment at bucketURL: file:///dir, s3://…,
// gs://…, or mem:// (this process's alone). A file:// directory is
// created if missing, 0700, as the logs say where and how runs were
// preempted.
func Open(ctx context.Context, bucketURL, deployment string, opts Options) (*Store, error) {
	if deployment == "" || strings.ContainsAny(deployment, "/\\") {
		return nil, fmt.Errorf("market memory: deployment %q is not a valid name", deployment)
	}
	u, err := url.Parse(bucketURL)
	if err != nil {
		return nil, fmt.Errorf("market memory %q: %w; give a URL such as file:///var/lib/refuel/market-memory or s3://BUCKET?prefix=refuel-memory/", bucketURL, err)
	}
	if u.Scheme == "file" {
		q := u.Query()
		for k, v := range map[string]string{"create_dir": "true", "dir_file_mode": "0700", "no_tmp_dir": "true", "metadata": "skip"} {
			if !q.Has(k) {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("market memory %s: %w", bucketURL, err)
	}
	// Drivers such as s3blob open lazily: ask once now, so a wrong bucket
	// or missing credentials show up at start, naming the URL.
	ok, err := b.IsAccessible(ctx)
	if err == nil && !ok {
		err = errors.New("bucket does not exist")
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("market memory %s: %w", bucketURL, err)
	}
	s := New(blob.PrefixedBucket(b, deployment+"/"), bucketURL+" (deployment "+deployment+")", opts)
	s.owned = true
	return s, nil
}

// New is a Store over b, a bucket (or prefix) holding one deployment's
// memory; where names it in errors. Close leaves b open.
func New(b *blob.Bucket, where string, opts Options) *Store {
	if opts.Writer == "" {
		opts.Writer = newWriterName()
	}
	if opts.Fresh <= 0 {
		opts.Fresh = 10 * time.Second
	}
	if opts.Idle <= 0 {
		opts.Idle = 24 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{bucket: b, where: where, opts: opts, own: Shard{Writer: opts.Writer}, view: Merge(nil)}
}

// newWriterName is the host's name with a random suffix: readable in a
// listing, and never another process's.
func newWriterName() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, host)
	var b [6]byte
	_, _ = rand.Read(b[:])
	if host == "" {
		host = "worker"
	}
	return host + "-" + hex.EncodeToString(b[:])
}

// Close releases the bucket Open opened.
func (s *Store) Close() error {
	if s.owned {
		return s.bucket.Close()
	}
	return nil
}

// Writer is the name of this store's shard.
func (s *Store) Writer() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.own.Writer
}

// Tried records a try of a spot offering (its key) that found stock or
// did not. A try like the last costs no I/O.
func (s *Store) Tried(ctx context.Context, key string, found bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	open := !s.view.Stock[key].NoneSince.IsZero()
	var err error
	if found != open && !s.stale() {
		return nil
	}
	// An outage may begin or end: see what the other writers know first.
	err = s.refresh(ctx)
	if !s.own.Tried(s.view, key, found, s.opts.Now()) {
		return err
	}
	return errors.Join(err, s.save(ctx))
}

// Held records a spot instance (its id) of the offering key held for d,
// until it was preempted or given back.
func (s *Store) Held(ctx context.Context, id, key string, d time.Duration, preempted bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.own.Held(id, key, d, preempted)
	return s.save(ctx)
}

// Taught records what an instance (its id) taught its pool.
func (s *Store) Taught(ctx context.Context, id, pool string, l policy.CheckpointLog) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.own.Taught(id, pool, l)
	return s.save(ctx)
}

// History is what the deployment saw of each offering's stock, in order
// (View.History). When the shards cannot be read it is what was read
// last, with the error.
func (s *Store) History(ctx context.Context, keys []string) ([]policy.Availability, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.refreshIfStale(ctx)
	return s.view.History(keys, s.opts.Now()), err
}

// CheckpointLog is what the deployment learned of a pool. When the
// shards cannot be read it is what was read last, with the error.
func (s *Store) CheckpointLog(ctx context.Context, pool string) (policy.CheckpointLog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.refreshIfStale(ctx)
	return s.view.Pools[pool], err
}

// View reads every writer's shard and merges them.
func (s *Store) View(ctx context.Context) (View, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.refresh(ctx)
	return s.view, err
}

func (s *Store) stale() bool {
	return s.readAt.IsZero() || s.opts.Now().Sub(s.readAt) >= s.opts.Fresh
}

func (s *Store) refreshIfStale(ctx context.Context) error {
	if !s.stale() {
		return nil
	}
	return s.refresh(ctx)
}

// refresh reads the other writers' shards, takes over those of writers
// gone, and merges. A shard that cannot be read is left out, and said.
func (s *Store) refresh(ctx context.Context) error {
	now := s.opts.Now()
	var others []Shard
	var idle []Shard
	listed := map[string]bool{}
	var errs []error
	objs, err := listing.All(ctx, s.bucket, &blob.ListOptions{Delimiter: "/"})
	if err != nil {
		return fmt.Errorf("market memory %s: list: %w", s.where, err)
	}
	for _, obj := range objs {
		name, ok := strings.CutSuffix(obj.Key, ".json")
		if obj.IsDir || !ok {
			continue
		}
		listed[name] = true
		if name == s.own.Writer {
			continue
		}
		sh, err := s.read(ctx, obj.Key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		others = append(others, sh)
		if now.Sub(sh.Updated) > s.opts.Idle {
			idle = append(idle, sh)
		}
	}
	s.others, s.readAt = others, now
	errs = append(errs, s.finishAbsorbing(ctx, listed))
	for _, sh := range idle {
		errs = append(errs, s.absorb(ctx, sh))
	}
	s.view = Merge(append(s.others, s.own))
	return errors.Join(errs...)
}

// finishAbsorbing deletes the shards this writer absorbed that are
// still there, and forgets those gone.
func (s *Store) finishAbsorbing(ctx context.Context, listed map[string]bool) error {
	var errs []error
	kept := s.own.Absorbed[:0]
	for _, name := range s.own.Absorbed {
		if !listed[name] {
			continue
		}
		kept = append(kept, name)
		if err := s.bucket.Delete(ctx, name+".json"); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			errs = append(errs, fmt.Errorf("market memory %s: delete the absorbed shard %s: %w", s.where, name, err))
		}
	}
	s.own.Absorbed = kept
	return errors.Join(errs...)
}

// absorb takes over the shard of a writer gone: it claims it (only one
// writer can), folds it into its own shard, saves that, and only then
// deletes it. A crash in between leaves it counted once: readers skip a
// shard another names absorbed.
func (s *Store) absorb(ctx context.Context, sh Shard) error {
	for _, o := range append(s.others, s.own) {
		if slices.Contains(o.Absorbed, sh.Writer) {
			return nil
		}
	}
	err := s.bucket.WriteAll(ctx, claimKey(sh.Writer), []byte(s.own.Writer), &blob.WriterOptions{IfNotExist: true})
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return nil // another writer has it
	}
	if err != nil {
		return fmt.Errorf("market memory %s: claim the shard of %s, idle since before %s: %w", s.where, sh.Writer, s.opts.Idle, err)
	}
	s.own.Absorb(sh)
	if err := s.save(ctx); err != nil {
		return err // own keeps it; the next save writes it, the next refresh deletes it
	}
	if err := s.bucket.Delete(ctx, sh.Writer+".json"); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("market memory %s: delete the absorbed shard %s: %w", s.where, sh.Writer, err)
	}
	return s.pruneClaims(ctx)
}

// claimsKept is how many Idle spans a claim is kept: a writer taken over
// that comes back within it goes on under a new name (see save); one
// that comes back later still would count its old lessons twice.
const claimsKept = 30

// pruneClaims deletes the claims older than claimsKept Idle spans, so
// the claims of writers long gone do not pile up. It runs after each
// absorption, which is when one is added.
func (s *Store) pruneClaims(ctx context.Context) error {
	objs, err := listing.All(ctx, s.bucket, &blob.ListOptions{Prefix: "claims/"})
	if err != nil {
		return fmt.Errorf("market memory %s: list claims: %w", s.where, err)
	}
	var errs []error
	for _, obj := range objs {
		if time.Since(obj.ModTime) > claimsKept*s.opts.Idle {
			if err := s.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func claimKey(writer string) string { return "claims/" + writer }

// save writes this writer's shard. If a live writer took it over while
// this one was silent for long (a worker paused or cut off for a day),
// this one goes on under a new name with only what the other could not
// have: its outage marks and recent observations, which count once.
func (s *Store) save(ctx context.Context) error {
	now := s.opts.Now()
	if !s.wroteAt.IsZero() && now.Sub(s.wroteAt) > s.opts.Idle/2 {
		taken, err := s.bucket.Exists(ctx, claimKey(s.own.Writer))
		if err != nil {
			return fmt.Errorf("market memory %s: %w", s.where, err)
		}
		if taken {
			s.own = s.own.renamed(newWriterName())
		}
	}
	s.own.Updated = now
	data, err := json.Marshal(s.own)
	if err != nil {
		return err
	}
	if err := s.bucket.WriteAll(ctx, s.own.Writer+".json", data, &blob.WriterOptions{ContentType: "application/json", BeforeWrite: private}); err != nil {
		return fmt.Errorf("market memory %s: write shard %s: %w", s.where, s.own.Writer, err)
	}
	s.wroteAt = now
	s.view = Merge(append(s.others, s.own))
	return nil
}

// private makes a file:// shard this user's alone (0600), as the logs
// say where and how runs were preempted; other drivers have their own
// access control.
func private(as func(any) bool) error {
	var f *os.File
	if as(&f) {
		return f.Chmod(0o600)
	}
	return nil
}

func (s *Store) read(ctx context.Context, key string) (Shard, error) {
	data, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		return Shard{}, fmt.Errorf("market memory %s: read %s: %w", s.where, key, err)
	}
	var sh Shard
	if err := json.Unmarshal(data, &sh); err != nil {
		return Shard{}, fmt.Errorf("market memory %s: %s: %w; delete it to forget what that writer learned", s.where, key, err)
	}
	if want := strings.TrimSuffix(key, ".json"); sh.Writer != want {
		return Shard{}, fmt.Errorf("market memory %s: %s names writer %q; delete it or rename it %s.json", s.where, key, sh.Writer, sh.Writer)
	}
	return sh, nil
}

package marketmem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"gocloud.dev/blob"

	"refuel/pkg/listing"
)

// Peek is the memory of deployment at bucketURL as its writers left it,
// read without writing anything: no shard of its own, no shard of a
// writer gone taken over, no directory created. A client that only asks
// what the deployment knows (an estimate before a run is submitted) reads
// it so. A file:// memory whose directory does not exist yet is empty.
func Peek(ctx context.Context, bucketURL, deployment string) (View, error) {
	if deployment == "" || strings.ContainsAny(deployment, "/\\") {
		return View{}, fmt.Errorf("market memory: deployment %q is not a valid name", deployment)
	}
	u, err := url.Parse(bucketURL)
	if err != nil {
		return View{}, fmt.Errorf("market memory %q: %w; give a URL such as file:///var/lib/refuel/market-memory or s3://BUCKET?prefix=refuel-memory/", bucketURL, err)
	}
	if u.Scheme == "file" {
		if _, err := os.Stat(u.Path); errors.Is(err, fs.ErrNotExist) {
			return Merge(nil), nil
		}
		q := u.Query()
		for k, v := range map[string]string{"no_tmp_dir": "true", "metadata": "skip"} {
			if !q.Has(k) {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return View{}, fmt.Errorf("market memory %s: %w", bucketURL, err)
	}
	defer b.Close()
	s := New(blob.PrefixedBucket(b, deployment+"/"), bucketURL+" (deployment "+deployment+")", Options{})
	defer s.Close()
	var shards []Shard
	objs, err := listing.All(ctx, s.bucket, &blob.ListOptions{Delimiter: "/"})
	if err != nil {
		return View{}, fmt.Errorf("market memory %s: list: %w", s.where, err)
	}
	for _, obj := range objs {
		if obj.IsDir || !strings.HasSuffix(obj.Key, ".json") {
			continue
		}
		sh, err := s.read(ctx, obj.Key)
		if err != nil {
			return View{}, err
		}
		shards = append(shards, sh)
	}
	return Merge(shards), nil
}

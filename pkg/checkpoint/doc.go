// Package checkpoint keeps a job's checkpoints in object storage through
// gocloud.dev/blob, so the same code serves file://, mem://, s3:// and gs://.
// A mem:// bucket is this process's, one per URL (mem://, mem://name):
// every store opened on it sees the same checkpoints until the process
// ends, which is what instances hosted in the process need.
//
// Layout under the bucket, one prefix per job and step:
//
//	<jobID>/step-000000000042/data/<relative file path>
//	<jobID>/step-000000000042/manifest.json
//	<jobID>/shards/rank-<r>/step-000000000042/…   a gang's rank r's own shards (OpenShard), laid out alike
//
// The manifest lists every file with its size and sha256 and is written
// last, so a checkpoint is good only when its manifest exists and every file
// it lists is present with that size and hash. A crash mid-upload therefore
// leaves data without a manifest, which is never taken as the latest.
package checkpoint

// Package marketmem is a deployment's market memory: what its runs have
// seen of each spot offering's stock (the stock logs deadline runs plan
// with) and what each pool taught about checkpointing (the checkpoint logs
// `interval: auto` reads). Every worker of a deployment reads and writes
// the same memory, in object storage through gocloud.dev/blob, so the
// workers learn as one and the memory outlives any worker's disk.
//
// Object storage gives no compare-and-swap that every driver honours, so
// no object has two writers. Each worker process writes a shard of its
// own and readers merge all of a deployment's shards:
//
//	<deployment>/<writer>.json    one worker's observations (Shard)
//	<deployment>/claims/<writer>  a dead writer's shard taken over by another
//
// The merge is a sum, so it is the same whatever order shards are read
// in, and two workers writing at once cannot lose each other's lessons.
// An observation that two writers can both record (an activity retried on
// another worker after its first worker died; two workers ending the same
// outage at once) carries an ID and counts once while it is recent.
//
// The memory stays bounded: a shard keeps one summary per offering or
// pool plus its latest observations, and the shard of a writer silent for
// a day (a worker gone) is folded into a live writer's and deleted.
// Claiming it is the one conditional write (blob's IfNotExist, which the
// file, mem, s3 and gcs drivers honour), so two live writers never both
// fold the same shard.
package marketmem

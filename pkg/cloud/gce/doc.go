// Package gce rents GPU instances from Google Compute Engine through
// Google's Go client (google.golang.org/api/compute/v1).
//
// Credentials are Application Default Credentials
// (GOOGLE_APPLICATION_CREDENTIALS, `gcloud auth application-default
// login`, or the service account of the VM refuel runs on); the project
// (--gce-project, env REFUEL_GCE_PROJECT) and the zones (--gce-zones)
// come from Config. With Config.Endpoint (--gce-endpoint) the provider
// talks to that endpoint without credentials: that is how it reaches
// refuel's simulator (package sim/gceapi).
//
// Acquire makes one instances.insert per offering tried, with a
// deterministic instance name and requestId per run and attempt, and
// waits for its operation (zoneOperations.wait) and for the instance to
// run. Spot VMs use provisioningModel SPOT with instanceTerminationAction
// DELETE; on-demand is the same insert without them. The accelerator-
// optimized machine types (a2-highgpu-1g, a3-highgpu-1g, g2-standard-4)
// carry their GPUs, which machineTypes reports; an N1 type attaches them
// with guestAccelerators (MachineType.Accelerator). Compute Engine has no
// spot price API: prices come from a table with its source and date
// (prices.json, DefaultPrices).
//
// # Labels
//
// Every instance is labelled refuel-run, refuel-pool, refuel-deployment
// (and refuel-managed-by, refuel-attempt, refuel-identity, refuel-team
// when the request has them), which is what List, and so the janitor,
// selects by. A label value may hold only lowercase letters, digits, '-'
// and '_', at most 63 characters: LabelValue lowers letters, turns any
// other character into '-' and shortens a longer value with a hash of it.
// The exact tags also go into the instance's metadata (refuel-tags), so
// an instance describes with its run's ID as it was.
//
// # Errors
//
// Compute Engine's codes map onto refuel's classes (ClassOfCode):
// ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS) is no-capacity,
// QUOTA_EXCEEDED quota, rateLimitExceeded throttled,
// UNSUPPORTED_OPERATION spec-mismatch, and a refused credential (401) or
// permission (403) config, saying what to fix. A code nobody mapped is
// reported as itself, class unknown, never as a stock-out.
//
// # The image
//
// The provider chooses machine type, zone and market; the boot image
// (Config.Image) and its startup script (Config.StartupScript) must start
// the node agent on the instance's own task queue, "refuel-node-" and the
// instance's name, which the metadata server gives:
//
//	#!/bin/bash
//	set -euo pipefail
//	md=http://metadata.google.internal/computeMetadata/v1
//	name=$(curl -fsS -H 'Metadata-Flavor: Google' $md/instance/name)
//	mkdir -p /var/lib/refuel
//	exec /usr/local/bin/worker agent \
//	  --instance-id "$name" --task-queue "refuel-node-$name" --dir /var/lib/refuel \
//	  --temporal-address temporal.example.internal:7233 --namespace default \
//	  --checkpoint-url gs://example-bucket/checkpoints
package gce

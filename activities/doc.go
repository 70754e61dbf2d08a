// Package activities holds the thin adapters between Temporal and pkg/:
// capacity (acquire, release, interrupt), checkpoints, the node agent's
// training activity, and the janitor's reconciliation. Their inputs and
// outputs are plain JSON structs so workflows in any SDK could call them.
package activities

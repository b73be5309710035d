// Package peer is how the nodes of a cluster with data = "peers" read each
// other's copies: who owns a file (rendezvous hashing over the live
// members), how a request is signed with the cluster key and checked by
// the node that serves it, and an HTTP/2 server and client for byte
// ranges of the files a node holds and for a request that the owner
// fetch a file.
//
// The package trusts nothing it receives. A request without a valid MAC
// of the cluster key, a stale one, or one naming a file the serving node
// does not hold, is refused before any file is touched; a range a peer
// returns is only bytes here: the cluster package checks it against the
// file's manifest (the MACs the first node computed as it read the file
// from the source) before a reader sees one byte of it. Membership, the
// directory of holders and the fill leases live in Redis Cluster (package
// cluster): there is no protocol between nodes beyond these requests.
package peer

import (
	"errors"

	"github.com/epochfs/epochfs/internal/cluster/layout"
)

// Key names one version of a dataset file.
type Key = layout.FileKey

// Errors of a peer's answer.
var (
	// ErrNotHeld: the peer does not hold that version of the file (it
	// answered 404).
	ErrNotHeld = errors.New("peer: file not held there")
	// ErrRefused: the peer refused the request (401: the key differs, or
	// the clocks are too far apart; 400: a request it could not parse).
	ErrRefused = errors.New("peer: request refused")
	// ErrBusy: the peer is serving as many requests as it takes (503).
	ErrBusy = errors.New("peer: busy")
	// ErrNoRoom: the owner cannot keep the file (409): its tiers are full.
	ErrNoRoom = errors.New("peer: no room for the file there")
	// ErrShort: the peer's answer was not the length asked for.
	ErrShort = errors.New("peer: answer of the wrong length")
)

// MaxRange is the largest range one request asks for: 64 chunks of 1 MiB.
const MaxRange = 64 << 20

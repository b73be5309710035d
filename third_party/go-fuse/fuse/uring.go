// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package fuse

// IoUringStats describes the io_uring transport of a server.
type IoUringStats struct {
	// On: requests come through FUSE over io_uring.
	On bool
	// Queues is the number of queues (one per possible CPU), Depth the
	// entries of each queue whose CPU is online.
	Queues, Depth int
	// Requests answered through the rings, and helper threads started
	// for queues whose thread was held up by a slow handler.
	Requests, Helpers int64
}

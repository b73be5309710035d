// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build !linux

package fuse

// FUSE over io_uring exists on Linux only (uring_linux.go).
type ringPool struct{}

func (ms *Server) setupRings(req *requestAlloc) {}
func (ms *Server) startRings()                  {}
func (ms *Server) stopRings()                   {}

// IoUring reports whether requests come through FUSE over io_uring: never
// on this system.
func (ms *Server) IoUring() IoUringStats { return IoUringStats{} }

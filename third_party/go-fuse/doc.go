// Copyright 2019 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// This is a repository containing Go bindings for writing FUSE file
// systems.
//
// Go to https://godoc.org/github.com/hanwen/go-fuse/fs for the
// in-depth documentation for this library.
//
// Older, deprecated APIs are available at
// https://godoc.org/github.com/hanwen/go-fuse/fuse/pathfs and
// https://godoc.org/github.com/hanwen/go-fuse/fuse/nodefs.
package lib

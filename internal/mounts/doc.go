// Package mounts is a node's epochfs mounts as the system sees them,
// without asking a daemon anything (so that it works when one is hung or
// dead): the runtime records of the mounts and the daemons that serve them
// (record.go), whether a record can be trusted (trust.go), the state
// directory's lock and the mount point's (lock.go), the kernel's mount
// table (mountinfo.go), the mount namespaces that still hold a mount
// (holders.go), and the abort of a dead daemon's FUSE connection
// (fusectl.go). The daemon writes its record and holds its lock through
// it; the command line finds, lists and unmounts mounts through it.
package mounts

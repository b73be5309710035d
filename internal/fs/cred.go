package fs

import (
	"bufio"
	"context"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// nobody is the credential of a request that carries none: it passes no
// check but the others' bits.
var nobody = &catalog.Cred{UID: math.MaxUint32, GID: math.MaxUint32}

// callerCred returns the credentials of the process behind a request: the
// fs uid and gid the kernel sends, and the supplementary groups read from
// /proc/PID/status. The groups are taken only if that process still has
// the request's fs uid and gid (the pid may have been reused); otherwise
// the caller counts with no supplementary group, which can only deny more.
func callerCred(ctx context.Context) *catalog.Cred {
	c, ok := ctx.(*fuse.Context)
	if !ok {
		return nobody
	}
	who := &catalog.Cred{UID: c.Uid, GID: c.Gid}
	if who.Root() {
		return who
	}
	who.Groups = procGroups(c.Pid, c.Uid, c.Gid)
	return who
}

// mayRead reports whether the caller of ctx may read a file of attributes
// a, as the kernel's default_permissions checks (ACLs are not seen). The
// daemon checks it again at every open against the attributes it serves,
// which may be newer than those the kernel checked (a copy or a read
// that found the source's owner or mode changed). The supplementary
// groups are read only when they could change the answer.
func mayRead(ctx context.Context, a catalog.Attr) bool {
	c, ok := ctx.(*fuse.Context)
	if !ok || c.Uid == 0 {
		return true // the daemon's own calls; root
	}
	who := &catalog.Cred{UID: c.Uid, GID: c.Gid}
	if a.UID == c.Uid || a.GID == c.Gid || (a.Mode>>3)&catalog.PermRead == a.Mode&catalog.PermRead {
		return who.MayRead(a)
	}
	return callerCred(ctx).MayRead(a)
}

// opener is mayRead for the caller of ctx, kept past the request's end
// (placement.Reader.SetOpener): the caller's ids are copied, since the
// request's context is used again for later requests.
func opener(ctx context.Context) func(catalog.Attr) bool {
	c, ok := ctx.(*fuse.Context)
	if !ok || c.Uid == 0 {
		return func(catalog.Attr) bool { return true } // the daemon's own calls; root
	}
	cc := &fuse.Context{Caller: c.Caller}
	return func(a catalog.Attr) bool { return mayRead(cc, a) }
}

// procGroups reads the supplementary groups of process pid, if its fs uid
// and gid are uid and gid.
func procGroups(pid, uid, gid uint32) []uint32 {
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil
	}
	defer f.Close()
	var groups []uint32
	uidOK, gidOK := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		switch k {
		case "Uid", "Gid":
			// real, effective, saved, fs
			want := uid
			if k == "Gid" {
				want = gid
			}
			if len(fields) != 4 || fields[3] != strconv.FormatUint(uint64(want), 10) {
				return nil
			}
			if k == "Uid" {
				uidOK = true
			} else {
				gidOK = true
			}
		case "Groups":
			for _, g := range fields {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil {
					groups = append(groups, uint32(n))
				}
			}
		}
	}
	if !uidOK || !gidOK {
		return nil
	}
	return groups
}

package mounts

import (
	"os"
	"testing"
)

// list joins the mount table's epochfs mounts with the daemons' records:
// a mount with a live daemon is serving, one without is dead, a live
// daemon whose mount is gone is draining, and other file systems and
// records of daemons gone with their mounts are left out.
func TestListJoinsMountsAndRecords(t *testing.T) {
	self := Record{PID: os.Getpid(), Start: ProcStart(os.Getpid())} // a live "daemon"
	live := func(mnt, dev, state string) Record {
		r := self
		r.Mountpoint, r.Dev, r.StateDir, r.Source = mnt, dev, state, "/pfs"+mnt
		return r
	}
	table := []MountEntry{
		{Dir: "/mnt/b", Dev: "0:51", FSType: "fuse.epochfs", Source: "/pfs/mnt/b"},
		{Dir: "/mnt/a", Dev: "0:50", FSType: "fuse.epochfs", Source: "/pfs/mnt/a"},
		{Dir: "/scratch", Dev: "8:1", FSType: "ext4", Source: "/dev/sda1"},
		{Dir: "/mnt/dead", Dev: "0:52", FSType: "fuse.epochfs", Source: "/pfs/dead"},
	}
	gone := Record{PID: 1 << 22, Start: 1, Mountpoint: "/mnt/old", Dev: "0:9"} // no such process
	records := []Record{live("/mnt/a", "0:50", "/s/a"), live("/mnt/b", "0:51", "/s/b"), live("/mnt/c", "0:40", "/s/c"), gone}
	got := List(table, records)
	want := []Listed{
		{"/mnt/a", "/pfs/mnt/a", "/s/a", self.PID, "serving"},
		{"/mnt/b", "/pfs/mnt/b", "/s/b", self.PID, "serving"},
		{"/mnt/c", "/pfs/mnt/c", "/s/c", self.PID, "draining"},
		{"/mnt/dead", "/pfs/dead", "", 0, "dead"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

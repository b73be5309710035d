package mounts

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A FUSE mount lives while any mount namespace holds it: an unmount in
// one namespace leaves its daemon serving the others (a container, a
// systemd unit with PrivateTmp, an sshd started while the mount existed
// and whose namespace copied it). Holders finds them, so that what keeps a
// mount alive is named instead of guessed.

// Holder is a mount namespace that holds a mount, and one process in it.
type Holder struct {
	NS   string // the namespace, as /proc/PID/ns/mnt reads ("mnt:[4026532...]")
	PID  int    // a process in it
	Comm string // that process's name
	Dir  string // where the mount is in that namespace
}

func (h Holder) String() string {
	return fmt.Sprintf("%s (pid %d %s, at %s)", h.NS, h.PID, h.Comm, h.Dir)
}

// Holders returns the mount namespaces other than this process's that hold
// the mount of device dev (MAJOR:MINOR, a FUSE connection's), one process
// each, by namespace.
func Holders(dev string) []Holder {
	self, _ := os.Readlink("/proc/self/ns/mnt")
	seen := map[string]bool{self: true}
	var out []Holder
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		ns, err := os.Readlink(dir + "/ns/mnt")
		if err != nil || seen[ns] {
			continue
		}
		seen[ns] = true
		for _, m := range mountsOf(dir + "/mountinfo") {
			if m.Dev != dev {
				continue
			}
			pid, _ := strconv.Atoi(filepath.Base(dir))
			comm, _ := os.ReadFile(dir + "/comm")
			out = append(out, Holder{NS: ns, PID: pid, Comm: strings.TrimSpace(string(comm)), Dir: m.Dir})
			break
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].PID < out[b].PID })
	return out
}

// HoldersText names holders for a message: at most three, and how many
// more.
func HoldersText(hs []Holder) string {
	var parts []string
	for i, h := range hs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(hs)-3))
			break
		}
		parts = append(parts, h.String())
	}
	return strings.Join(parts, ", ")
}

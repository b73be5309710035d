package fs

// What the mount shows through .epochfs/ is also offered to the daemon's
// other faces (the Prometheus endpoint): the status list itself, so that a
// key added to status() appears there without a second list to keep.

// StatusEntry is one line of .epochfs/status.
type StatusEntry struct {
	Key     string
	Value   string
	Numeric bool // the value is a number (a JSON number in status.json)
}

// Status returns .epochfs/status as entries, in the file's order.
func (fsys *FS) Status() []StatusEntry {
	kvs := fsys.status()
	out := make([]StatusEntry, len(kvs))
	for i, e := range kvs {
		out[i] = StatusEntry{Key: e.k, Value: e.v, Numeric: e.num}
	}
	return out
}

// JobOwner returns the uid of the user who made job name's directory under
// .epochfs/jobs/ (0 for root).
func (fsys *FS) JobOwner(name string) (uid uint32, ok bool) {
	if fsys.o.Jobs == nil {
		return 0, false
	}
	info, live := fsys.o.Jobs.Lookup(name)
	if !live {
		return 0, false
	}
	if info.Owner == nil {
		return 0, true
	}
	return info.Owner.UID, true
}

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

// DocBytes is what the open ctl documents of every user but root hold now
// (their budget's use).
func (fsys *FS) DocBytes() int { return fsys.docs.total() }

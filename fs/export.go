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
// .epochfs/jobs/, if the mount saw it made.
func (fsys *FS) JobOwner(name string) (uid uint32, ok bool) {
	if fsys.o.Jobs == nil {
		return 0, false
	}
	id, live := fsys.o.Jobs.Job(name)
	if !live {
		return 0, false
	}
	o, found := fsys.jobOwners.Load(id)
	if !found {
		return 0, false
	}
	return o.(owner).uid, true
}

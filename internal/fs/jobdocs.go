package fs

import (
	"github.com/epochfs/epochfs/internal/jobs"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
)

// The documents of a job's files: its config, the state it resumes from.

// configDoc is a job config document. Each line is parsed once, as it
// comes (jobs.ConfigParser), a subset line is checked against the dataset
// then, and after each write the document so far gets the checks that
// need no resolving of its subset (jobs.Manager.CheckConfig): a bad line,
// or a config that cannot be, fails the write that completes it. At each
// close that follows new lines the document so far is applied as the
// job's whole config (jobs.Manager.SetConfig: keys not given take their
// defaults, the job starts over at epoch 1), once; a rejected document
// puts back the config the job had before it.
type configDoc struct {
	p       *jobs.ConfigParser
	subset  func(prefix string) (int, error) // checks a subset line's prefix
	check   func(cfg jobs.Config, files int) error
	apply   func(cfg jobs.Config) error
	current func() ([]byte, error) // the job's config document
	restore func(doc []byte) error
	files   int             // files the subset lines name, added up
	seen    map[string]bool // the subset prefixes checked (each once)
	size    int             // bytes of the subset prefixes held
	checked bool            // the lines so far were checked whole
	dirty   bool            // lines since the last apply
	before  []byte          // the job's config before the document's first apply; nil: none yet
}

func newConfigDoc(m *jobs.Manager, ref jobRef) *configDoc {
	return &configDoc{
		p:       jobs.NewConfigParser(),
		subset:  func(prefix string) (int, error) { return m.CheckSubset(ref.job(), prefix) },
		check:   func(cfg jobs.Config, files int) error { return m.CheckConfig(ref.job(), cfg, files) },
		apply:   func(cfg jobs.Config) error { return m.SetConfig(ref.job(), cfg) },
		current: func() ([]byte, error) { return m.Config(ref.job()) },
		restore: func(doc []byte) error { return m.Configure(ref.job(), doc) },
	}
}

func (d *configDoc) line(l []byte) error {
	keys := d.p.Keys()
	prefix, err := d.p.Line(l)
	if err != nil {
		return err
	}
	if prefix != "" && !d.seen[prefix] {
		if d.seen == nil {
			d.seen = map[string]bool{}
		}
		d.seen[prefix] = true
		n, err := d.subset(prefix)
		if err != nil {
			return err
		}
		d.files += n
		d.size += len(prefix) + 16
	}
	if d.p.Keys() > keys {
		d.dirty, d.checked = true, false
	}
	return nil
}

func (d *configDoc) held() int      { return d.size }
func (d *configDoc) release() error { return nil }

// written checks the document so far whole, without applying it.
func (d *configDoc) written() error {
	if d.checked || d.check == nil {
		return nil
	}
	cfg := d.p.Config()
	files := d.files
	if cfg.Subset == nil {
		files = -1
	}
	if err := d.check(cfg, files); err != nil {
		return err
	}
	d.checked = true
	return nil
}

func (d *configDoc) commit() error {
	if !d.dirty {
		return nil
	}
	if err := d.written(); err != nil {
		return err
	}
	if d.before == nil {
		b, err := d.current()
		if err != nil {
			return err
		}
		d.before = b
	}
	if err := d.apply(d.p.Config()); err != nil {
		return err
	}
	d.dirty = false
	return nil
}

func (d *configDoc) abort() {
	if d.before != nil {
		d.restore(d.before) // it was the config: it parses
		d.before = nil
	}
}

// newStateFile is jobs/NAME/state and jobs/NAME/rank/R/state: the job's
// state document (its ranks share their epochs). The owner's only: a
// cluster job's names files (its unread lines) other users may not see.
func newStateFile(ref jobRef, rank int, ino uint64) fusefs.InodeEmbedder {
	return &ctlFile{fsys: ref.fsys, spec: ctlSpec{name: ref.label(rank, "state"), ino: ino, mode: 0o400, owner: ref.owner,
		check: ref.checkOf(rank),
		read:  func() ([]byte, error) { return ref.fsys.o.Jobs.State(ref.job()) }}}
}

// resumeDoc is a document written to jobs/NAME/resume: a state document
// (internal/jobs/state.go), applied whole at each close. A rejected document puts
// the job back as it was before the document's first apply: resumed from
// what it had resumed from, if anything, or else started over from its
// config (the job has not read: that is all there is of it).
type resumeDoc struct {
	apply    func(text []byte) error
	previous func() *jobs.ResumePoint
	undo     func(*jobs.ResumePoint) error
	text     []byte
	applied  bool // the document applied something
	dirty    bool // lines since the last apply
	before   *jobs.ResumePoint
}

func (d *resumeDoc) line(l []byte) error {
	d.text = append(append(d.text, l...), '\n')
	d.dirty = true
	return nil
}

func (d *resumeDoc) held() int      { return cap(d.text) }
func (d *resumeDoc) written() error { return nil } // a state is whole only at its close
func (d *resumeDoc) release() error { return nil }

func (d *resumeDoc) commit() error {
	if len(d.text) == 0 || !d.dirty {
		return nil
	}
	if !d.applied {
		d.before = d.previous()
	}
	if err := d.apply(d.text); err != nil {
		return err
	}
	d.applied, d.dirty = true, false
	return nil
}

func (d *resumeDoc) abort() {
	if d.applied {
		d.undo(d.before) // it applied before: it applies
		d.applied = false
	}
	d.text = nil
}

package fs

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// The path documents of warmup, refresh and verify: "all", or dataset
// paths (files or directories) one per line, quoted by package ctlpath
// when they are not plain lines. Blank lines and lines starting with '#'
// are ignored, and white space around a line is not part of it. verify
// also takes a "--content" line, refresh an "--allow-drop" line.
//
// Every line is checked as it arrives (a path must exist and the writer
// must be able to open it: catalog.Catalog.LookupAs). At each close the request
// so far is held (warmup: counted in progress, not queued); at the
// document's release it is queued (refresh and verify start); a rejected
// document cancels what it held: it queued nothing.

// pathRequest is what a path document asks for at a commit.
type pathRequest struct {
	all     bool
	content bool             // verify: compare bytes
	allow   bool             // refresh: remove past placement.max_drop
	files   []*catalog.Entry // warmup: the files the paths name
	paths   []string         // refresh, verify: the cleaned paths
}

// heldRequest is a request held until its document ends.
type heldRequest struct {
	release func() error
	cancel  func()
}

// pathTarget is what a path document works on: the placer, or a stand-in
// in tests.
type pathTarget struct {
	// resolve checks one path as the writer may see it: for warmup the
	// files it names, for refresh and verify nothing. An error that is
	// placement.ErrNoEntry reads as "no such file" whatever the reason.
	resolve func(path string) ([]*catalog.Entry, error)
	// check, if set, vets the files of each line as it arrives (the
	// write fails), before hold vets the request again.
	check func(files []*catalog.Entry) error
	// hold takes a request, to be released or cancelled; an error
	// refuses it (the close fails, nothing is held).
	hold func(req pathRequest) (heldRequest, error)
	// content: "--content" is a keyword (verify); allowDrop:
	// "--allow-drop" is (refresh).
	content, allowDrop bool
	// paths: requests carry the paths (refresh, verify), not only the
	// files they name.
	paths bool
}

type pathDoc struct {
	t     pathTarget
	n     int  // lines seen
	all   bool // "all" was given
	named bool // "all" or a path was given
	req   pathRequest
	dirty bool // req holds something not yet held
	holds []heldRequest
	size  int // about the bytes req and holds take (held)
}

func (d *pathDoc) line(l []byte) error {
	d.n++
	if bytes.IndexByte(l, 0) >= 0 {
		return lineError(d.n, string(l), invalid("a NUL byte"))
	}
	s := strings.TrimSpace(string(l))
	switch {
	case s == "" || s[0] == '#':
		return nil
	case s == "all":
		if d.named && !d.all {
			return lineError(d.n, s, invalid("\"all\" cannot be combined with paths"))
		}
		d.all, d.named, d.dirty = true, true, true
		d.req.all = true
		return nil
	case d.t.content && s == "--content":
		d.req.content = true
		return nil
	case d.t.allowDrop && s == "--allow-drop":
		d.req.allow = true
		return nil
	}
	if d.all {
		return lineError(d.n, s, invalid("paths cannot be combined with \"all\""))
	}
	p, err := ctlpath.Unquote(s)
	if err != nil {
		return lineError(d.n, s, invalid("%v", err))
	}
	files, err := d.t.resolve(p)
	if err != nil {
		if errors.Is(err, placement.ErrNoEntry) {
			err = invalid("%v", placement.ErrNoEntry)
		}
		return lineError(d.n, s, err)
	}
	if d.t.check != nil {
		if err := d.t.check(files); err != nil {
			return fmt.Errorf("line %d: %w", d.n, err) // its own errno (EDQUOT)
		}
	}
	d.named, d.dirty = true, true
	d.req.files = append(d.req.files, files...)
	d.size += 8 * len(files)
	if d.t.paths {
		d.req.paths = append(d.req.paths, p)
		d.size += len(p) + 16
	}
	return nil
}

func (d *pathDoc) written() error { return nil }
func (d *pathDoc) held() int      { return d.size }

func (d *pathDoc) commit() error {
	if !d.named {
		return invalid("empty document: write \"all\" or dataset paths, one per line")
	}
	if !d.dirty {
		return nil
	}
	req := d.req
	d.req = pathRequest{content: req.content, allow: req.allow}
	d.dirty = false
	h, err := d.t.hold(req)
	if err != nil {
		return err
	}
	d.holds = append(d.holds, h)
	return nil
}

func (d *pathDoc) release() error {
	var first error
	for _, h := range d.holds {
		if err := h.release(); err != nil && first == nil {
			first = err
		}
	}
	d.holds = nil
	return first
}

func (d *pathDoc) abort() {
	d.req = pathRequest{}
	d.dirty = false
	for _, h := range d.holds {
		h.cancel()
	}
	d.holds = nil
}

// warmupTarget queues warmup for who: one placement.WarmupRequest, which
// holds the policy (who may name what, their bound, "all" as who sees it).
func (fsys *FS) warmupTarget(who *catalog.Cred) pathTarget {
	r := fsys.p.Warmups().Request(who)
	return pathTarget{
		resolve: r.Resolve,
		check:   r.Check,
		hold: func(req pathRequest) (heldRequest, error) {
			h, err := r.Hold(req.files, req.all)
			if err != nil {
				return heldRequest{}, err
			}
			return heldRequest{release: func() error { h.Release(); return nil }, cancel: h.Cancel}, nil
		},
	}
}

// dropTarget removes the tier copies of the files a document names, when
// its last descriptor closes (internal/placement/drop.go). The file is root's.
func (fsys *FS) dropTarget(who *catalog.Cred) pathTarget {
	p := fsys.p
	return pathTarget{
		resolve: func(path string) ([]*catalog.Entry, error) {
			return p.Catalog().ResolvePathsAs(who, []string{path})
		},
		hold: func(req pathRequest) (heldRequest, error) {
			fsys.dropsPending.Add(1)
			return heldRequest{
				release: func() error {
					defer fsys.dropsPending.Add(-1)
					files := req.files
					if req.all {
						files = p.Catalog().FilesAs(who)
					}
					p.Scrubber().Drop(files)
					return nil
				},
				cancel: func() { fsys.dropsPending.Add(-1) },
			}, nil
		},
	}
}

// scrubTarget sends refresh or verify requests. Their files are root's
// (mode 0644), so who is root unless a descriptor was handed over; each
// line's path is checked by placement.Scrubber.CheckPath.
func (fsys *FS) scrubTarget(kind placement.ScrubKind, who *catalog.Cred) pathTarget {
	sc := fsys.p.Scrubber()
	return pathTarget{
		resolve: func(path string) ([]*catalog.Entry, error) {
			return nil, sc.CheckPath(who, kind, path)
		},
		hold: func(req pathRequest) (heldRequest, error) {
			r := placement.ScrubRequest{Kind: kind, Paths: req.paths, AllowDrop: req.allow}
			if req.all {
				r.Paths = nil
			}
			if req.content {
				r.Kind = placement.ScrubVerifyContent
			}
			return heldRequest{
				// A path removed since its line was checked fails
				// here, where only .epochfs/errors hears of it.
				release: func() error {
					if err := sc.Request(r); err != nil {
						if errors.Is(err, placement.ErrNoEntry) {
							return invalid("%v", err)
						}
						return err
					}
					return nil
				},
				cancel: func() {},
			}, nil
		},
		content:   kind == placement.ScrubVerify,
		allowDrop: kind == placement.ScrubRefresh,
		paths:     true,
	}
}

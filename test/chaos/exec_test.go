package chaos

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// do runs one step and checks its answer; an error is a divergence.
func (r *runner) do(o op) error {
	r.counts[o.Kind]++
	switch o.Kind {
	case "read", "pread", "mmap", "stat", "xattr":
		return r.readOp(o)
	case "readdir":
		return r.readdir(o)
	case "hold", "readheld":
		return r.holdOp(o)
	case "userread":
		return r.userRead(o)
	case "status":
		if r.status() == nil {
			return fmt.Errorf("status does not answer within %v", slack)
		}
	case "warmup", "drop":
		return r.ctlWrite(o.Kind)
	case "refresh":
		return r.refresh()
	case "job", "endjob":
		return r.jobOp(o)
	case "state", "resume":
		return r.stateOp(o)
	case "add", "remove", "rewrite", "rename", "swapdir", "chmod":
		if o.Kind == "chmod" {
			r.m.changed(o.Path) // a copy of another mode is made again
		}
		return r.mutate(o)
	case "hang", "down", "die", "slow", "fill", "heal":
		r.fault(o)
	case "crash":
		return r.crash(o)
	}
	return nil
}

// readOp reads through the mount and checks the answer with the model.
func (r *runner) readOp(o op) error {
	if o.Path == "" {
		return nil
	}
	p := filepath.Join(r.mnt, o.Path)
	var a answer
	a.size = -1
	off, n := int64(-1), 0
	ok := r.within(readLimit(), o.String(), func() {
		switch o.Kind {
		case "read":
			a.data, a.err = readWhole(p)
		case "pread":
			off, n = o.Arg, 4096
			a.data, a.err = pread(p, off, n)
		case "mmap":
			a.data, a.err = mmapRead(p)
		case "stat":
			var st syscall.Stat_t
			if a.err = syscall.Stat(p, &st); a.err == nil {
				a.size = st.Size
			}
		case "xattr":
			buf := make([]byte, 64)
			var sz int
			if sz, a.err = syscall.Getxattr(p, "user.epochfs.tier", buf); a.err == nil {
				a.data = buf[:sz]
			}
		}
	})
	if !ok {
		return fmt.Errorf("%s: no answer within %v", o, readLimit())
	}
	a.err = syscallErr(a.err)
	if o.Kind == "xattr" {
		return r.checkTier(o.Path, a)
	}
	if err := r.m.check(o.Path, off, n, a, true); err != nil {
		return fmt.Errorf("%s: %w", o, err)
	}
	if f := r.m.files[o.Path]; f != nil && a.err == nil && o.Kind != "stat" && len(r.m.aliases(o.Path)) == 1 {
		f.opened = true
	}
	return nil
}

// checkTier checks a tier attribute: a tier or "source", and a copy seen
// resident is not lost while nothing may have removed it.
func (r *runner) checkTier(p string, a answer) error {
	f := r.m.files[p]
	if a.err != nil {
		if err := r.m.allowedErr(f, a.err); err != nil {
			return fmt.Errorf("xattr %s: %w", p, err)
		}
		return nil
	}
	v := string(a.data)
	switch {
	case v == "source":
		if f.resident {
			return fmt.Errorf("xattr %s: a resident copy was lost (nothing dropped, wiped or changed it)", p)
		}
	case v == "mem":
		// A copy of a content the mount has not yet learned was
		// replaced is dropped when it does: not one to keep.
		f.resident = !r.m.mayBeOld(p)
	default:
		return fmt.Errorf("xattr %s: tier %q", p, v)
	}
	return nil
}

// mmapRead maps p whole and copies it; a fault (SIGBUS) is an I/O error.
func mmapRead(p string) (data []byte, err error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return []byte{}, err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	defer syscall.Munmap(m)
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if recover() != nil {
			data, err = nil, syscall.EIO
		}
	}()
	return append([]byte(nil), m...), nil
}

// readdir lists a directory: every name must be one it ever held.
func (r *runner) readdir(o op) error {
	var names []string
	var err error
	if !r.within(readLimit(), o.String(), func() {
		var ents []os.DirEntry
		ents, err = os.ReadDir(filepath.Join(r.mnt, o.Path))
		for _, e := range ents {
			names = append(names, e.Name())
		}
	}) {
		return fmt.Errorf("%s: no answer within %v", o, readLimit())
	}
	if err != nil {
		if e := syscallErr(err); e == syscall.ENOENT || e == syscall.ENOTDIR || e == syscall.EIO && r.m.sick() {
			return nil
		}
		return fmt.Errorf("%s: %v", o, err)
	}
	for _, n := range names {
		if !r.m.mayList(o.Path, n) {
			return fmt.Errorf("%s: lists %q, which the source never had", o, n)
		}
	}
	return nil
}

// holdOp opens a file and keeps it, or reads one kept open: its bytes
// are one version, whatever changed since it was opened.
func (r *runner) holdOp(o op) error {
	if o.Kind == "hold" {
		if o.Path == "" {
			return nil
		}
		var f *os.File
		var err error
		if !r.within(readLimit(), o.String(), func() { f, err = os.Open(filepath.Join(r.mnt, o.Path)) }) {
			return fmt.Errorf("%s: no answer within %v", o, readLimit())
		}
		if err != nil {
			if err := r.m.allowedErr(r.m.files[o.Path], syscallErr(err)); err != nil {
				return fmt.Errorf("%s: %w", o, err)
			}
			return nil
		}
		r.held = append(r.held, &heldFile{f: f, path: o.Path})
		if len(r.held) > 8 {
			r.held[0].f.Close()
			r.held = r.held[1:]
		}
		return nil
	}
	if len(r.held) == 0 {
		return nil
	}
	h := r.held[int(o.Arg)%len(r.held)]
	var a answer
	a.size = -1
	if !r.within(readLimit(), o.String(), func() {
		buf := make([]byte, 512<<10)
		n, err := h.f.ReadAt(buf, 0)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		a.data, a.err = buf[:n], syscallErr(err)
	}) {
		return fmt.Errorf("%s %s: no answer within %v", o, h.path, readLimit())
	}
	if err := r.m.check(h.path, -1, 0, a, false); err != nil {
		return fmt.Errorf("%s %s: %w", o, h.path, err)
	}
	return nil
}

// ctlWrite writes "all" to warmup or drop: it must succeed.
func (r *runner) ctlWrite(name string) error {
	var err error
	if !r.within(slack, name, func() { err = os.WriteFile(filepath.Join(r.mnt, ".epochfs", name), []byte("all\n"), 0) }) {
		return fmt.Errorf("%s: no answer within %v", name, slack)
	}
	if err != nil {
		return fmt.Errorf("%s all: %v", name, err)
	}
	if name == "drop" {
		for _, f := range r.m.files {
			f.resident = false
		}
		// The copies go when the kernel releases the document's last
		// descriptor, after close returns: wait for that, as epochfs
		// drop does (a copy seen before it would count as lost after).
		deadline := time.Now().Add(slack)
		for {
			var b []byte
			r.within(slack, "drop", func() { b, err = os.ReadFile(filepath.Join(r.mnt, ".epochfs", "drop")) })
			if err == nil && strings.Contains(string(b), "pending=0\n") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("drop: pending not 0 within %v (%v): %q", slack, err, b)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// refresh runs epochfs refresh; with the source well before and after,
// it must succeed and the catalog must then hold exactly the source's
// files.
func (r *runner) refresh() error {
	wellBefore := !r.m.sick()
	code, out := r.cli(30*time.Second, "refresh", "--allow-drop", "--timeout", "20s", r.mnt)
	well := wellBefore && !r.m.sick()
	if code == -2 {
		return fmt.Errorf("refresh: %s", out)
	}
	if !well {
		if code != 0 && code != 1 && code != 3 {
			return fmt.Errorf("refresh with the source sick: exit %d: %s", code, out)
		}
		return nil
	}
	if code != 0 {
		return fmt.Errorf("refresh with the source well: exit %d: %s", code, strings.TrimSpace(out))
	}
	for _, f := range r.m.files {
		if f.present {
			f.unlisted, f.behind = false, false
		}
	}
	st := r.status()
	if st == nil {
		return fmt.Errorf("status does not answer after a refresh")
	}
	if want := fmt.Sprint(len(r.m.present())); st["files_total"] != want {
		return fmt.Errorf("after a refresh with the source well: files_total=%s, the source has %s files", st["files_total"], want)
	}
	return nil
}

// otherUID is the second user: nobody, whom only modes with read for
// others let in.
const otherUID = 65534

// userRead reads a file whole as the second user (cat, as that user, at
// the same time as the run's own reads of the mount as root).
func (r *runner) userRead(o op) error {
	if o.Path == "" {
		return nil
	}
	var a answer
	a.size = -1
	var out, errOut strings.Builder
	cmd := exec.Command("/bin/cat", filepath.Join(r.mnt, o.Path))
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	var err error
	if !r.within(readLimit(), o.String(), func() { err = cmd.Run() }) {
		cmd.Process.Kill()
		return fmt.Errorf("%s: no answer within %v", o, readLimit())
	}
	if err != nil {
		a.err = catErr(errOut.String())
	} else {
		a.data = []byte(out.String())
	}
	// What the source lets others do now: with validate = "open" the
	// mount must refuse them once it is so.
	openNow := true
	if st, err := os.Stat(filepath.Join(r.src, o.Path)); err == nil {
		openNow = st.Mode().Perm()&0o004 != 0
	}
	if errors.Is(a.err, syscall.EACCES) {
		r.counts["userread-eacces"]++ // (how often the refusal was tried)
	}
	if err := r.m.otherRead(o.Path, a, openNow); err != nil {
		return fmt.Errorf("%s (as uid %d): %w", o, otherUID, err)
	}
	return nil
}

// catErr is the errno cat's message names.
func catErr(msg string) error {
	for _, e := range []syscall.Errno{syscall.EACCES, syscall.EIO, syscall.ENOENT, syscall.ENOTDIR, syscall.ELOOP, syscall.ESTALE} {
		if strings.Contains(msg, e.Error()) || strings.Contains(strings.ToLower(msg), e.Error()) {
			return e
		}
	}
	return fmt.Errorf("cat: %s", strings.TrimSpace(msg))
}

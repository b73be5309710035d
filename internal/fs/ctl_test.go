package fs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/jobs"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// fakePaths is a path document's target without a placer: a path exists
// unless it contains "bad". held is what is held now (what progress would
// count), log what was released (queued).
type fakePaths struct{ held, log []string }

func (f *fakePaths) target(content bool) pathTarget {
	return pathTarget{
		resolve: func(p string) ([]*catalog.Entry, error) {
			if strings.Contains(p, "bad") {
				return nil, fmt.Errorf("%w: %q", placement.ErrNoEntry, p)
			}
			return []*catalog.Entry{catalog.NewFile(p, catalog.Attr{})}, nil
		},
		hold: func(req pathRequest) (heldRequest, error) {
			var items []string
			switch {
			case req.all:
				items = append(items, "ALL")
			default:
				for _, e := range req.files {
					items = append(items, e.Path())
				}
			}
			if req.content {
				items = append(items, "CONTENT")
			}
			f.held = append(f.held, items...)
			drop := func() {
				for _, it := range items {
					i := slices.Index(f.held, it)
					f.held = slices.Delete(f.held, i, i+1)
				}
			}
			return heldRequest{
				release: func() error { drop(); f.log = append(f.log, items...); return nil },
				cancel:  drop,
			}, nil
		},
		content: content,
	}
}

// fakeConfig is a job's config without a job manager: a subset prefix
// that contains "bad" names no file. applies counts the configs applied.
type fakeConfig struct {
	cfg     string
	applies int
}

func (f *fakeConfig) sink() docSink {
	return &configDoc{
		p: jobs.NewConfigParser(),
		subset: func(prefix string) (int, error) {
			if strings.Contains(prefix, "bad") {
				return 0, fmt.Errorf("%w: subset=%s matches no dataset file", jobs.ErrInvalid, prefix)
			}
			return 1, nil
		},
		apply: func(c jobs.Config) error {
			f.applies++
			f.cfg = string(c.Format())
			return nil
		},
		current: func() ([]byte, error) { return []byte(f.cfg), nil },
		restore: func(doc []byte) error {
			c, err := jobs.ParseConfig(doc)
			if err != nil {
				return err
			}
			f.cfg = string(c.Format())
			return nil
		},
	}
}

// writeDoc writes data in the given chunk sizes (the rest in one), closes
// once and releases; it returns the first error.
func writeDoc(d *document, data []byte, chunks []int) error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, n := range chunks {
		if len(data) == 0 {
			break
		}
		n = min(n, len(data))
		keep(d.write(data[:n]))
		data = data[n:]
	}
	if len(data) > 0 {
		keep(d.write(data))
	}
	keep(d.close())
	keep(d.release())
	return first
}

func TestPathDocumentGrammar(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		bad  string
	}{
		{in: "all\n", want: []string{"ALL"}},
		{in: "all", want: []string{"ALL"}},
		{in: "  all  \n\n", want: []string{"ALL"}},
		{in: "a/b.jpg\nc\n", want: []string{"a/b.jpg", "c"}},
		{in: "# comment\n a \n", want: []string{"a"}},
		{in: "\"#x\"\n\" lead\"\n\"trail \"\n\"a\\nb\"\n", want: []string{"#x", " lead", "trail ", "a\nb"}},
		{in: "\"all\"\n", want: []string{"all"}},
		{in: "x\r\n", want: []string{"x"}},
		{in: "", bad: "empty document"},
		{in: "\n \n# only a comment\n", bad: "empty document"},
		{in: "all\nx\n", bad: "cannot be combined"},
		{in: "x\nall\n", bad: "cannot be combined"},
		{in: "x\x00y", bad: "NUL"},
		{in: "good\nbad\n", bad: `line 2 "bad": no such file`},
		{in: "\"a\\qb\"\n", bad: "unknown escape"},
	}
	for _, c := range cases {
		f := &fakePaths{}
		d := newDocument(&pathDoc{t: f.target(false)}, maxPathDoc)
		if c.in == "" {
			d.write([]byte("")) // a zero-byte write does not start a document...
			if err := d.close(); err != nil || f.held != nil {
				t.Errorf("a close with nothing written: %v", err)
			}
			d.dirty = true // ...but a document of nothing but this is empty
		}
		err := writeDoc(d, []byte(c.in), nil)
		if c.bad != "" {
			if !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), c.bad) || f.log != nil || f.held != nil {
				t.Errorf("%q: err %v, applied %q; want EINVAL naming %q and nothing applied", c.in, err, f.log, c.bad)
			}
			continue
		}
		if err != nil || !slices.Equal(f.log, c.want) {
			t.Errorf("%q: applied %q, %v; want %q", c.in, f.log, err, c.want)
		}
	}
}

// TestARejectedDocumentRefusesEveryLaterWriteAndClose: bash goes on
// writing after a failed line; nothing of the document is applied, and
// each later write fails too.
func TestARejectedDocumentRefusesEveryLaterWriteAndClose(t *testing.T) {
	f := &fakePaths{}
	d := newDocument(&pathDoc{t: f.target(false)}, maxPathDoc)
	if err := d.write([]byte("GOOD\n")); err != nil {
		t.Fatal(err)
	}
	if err := d.write([]byte("bad\n")); !errors.Is(err, errInvalid) {
		t.Fatalf("the bad line's write: %v, want EINVAL", err)
	}
	for i := 0; i < 3; i++ {
		if err := d.write([]byte("GOOD2\n")); !errors.Is(err, errInvalid) {
			t.Fatalf("a write after the rejection: %v", err)
		}
	}
	if err := d.release(); !errors.Is(err, errInvalid) || f.log != nil || f.held != nil {
		t.Fatalf("release: %v, applied %q", err, f.log)
	}
	if n := d.takeRefused(); n != 3 {
		t.Fatalf("%d later writes counted, want 3", n)
	}
}

// TestADocumentIsHeldAtEachCloseAndDoneAtItsRelease: the first close (a
// shell's dup2 and close of the redirection) has nothing to hold; a close
// after writes holds them (progress counts them); writes through another
// descriptor of the same open are held at its close; the release queues
// all; a line rejected after a close cancels what was held.
func TestADocumentIsHeldAtEachCloseAndDoneAtItsRelease(t *testing.T) {
	f := &fakePaths{}
	d := newDocument(&pathDoc{t: f.target(false)}, maxPathDoc)
	if err := d.close(); err != nil || f.held != nil {
		t.Fatalf("close before any write: %v %q", err, f.held)
	}
	d.write([]byte("a\nb"))
	if f.held != nil {
		t.Fatalf("held before the close: %q", f.held)
	}
	if err := d.close(); err != nil || !slices.Equal(f.held, []string{"a", "b"}) || f.log != nil {
		t.Fatalf("close: %v, held %q, queued %q", err, f.held, f.log)
	}
	d.write([]byte("c\n"))
	if err := d.close(); err != nil || !slices.Equal(f.held, []string{"a", "b", "c"}) {
		t.Fatalf("second close: %v, held %q", err, f.held)
	}
	if err := d.release(); err != nil || !slices.Equal(f.log, []string{"a", "b", "c"}) || len(f.held) != 0 {
		t.Fatalf("release: %v, queued %q, held %q", err, f.log, f.held)
	}

	f = &fakePaths{}
	d = newDocument(&pathDoc{t: f.target(false)}, maxPathDoc)
	d.write([]byte("a\n"))
	d.close() // one process of "{ find a; echo bad; } > warmup" exits
	if err := d.write([]byte("bad\n")); !errors.Is(err, errInvalid) {
		t.Fatalf("bad line: %v", err)
	}
	if err := d.release(); !errors.Is(err, errInvalid) || len(f.held) != 0 || f.log != nil {
		t.Fatalf("a document rejected after a close: %v, held %q, queued %q; want nothing", err, f.held, f.log)
	}
}

func TestADocumentIsBounded(t *testing.T) {
	f := &fakePaths{}
	d := newDocument(&pathDoc{t: f.target(false)}, 10)
	if err := d.write([]byte("abcdefghi\n")); err != nil {
		t.Fatal(err)
	}
	if err := d.write([]byte("x")); !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Fatalf("write past the bound: %v", err)
	}
	if err := d.close(); err == nil || f.log != nil {
		t.Fatalf("close of an oversized document: %v, applied %q", err, f.log)
	}
}

func TestVerifyTakesContent(t *testing.T) {
	f := &fakePaths{}
	if err := writeDoc(newDocument(&pathDoc{t: f.target(true)}, maxPathDoc), []byte("--content\nx\n"), nil); err != nil || !slices.Equal(f.log, []string{"x", "CONTENT"}) {
		t.Fatalf("verify --content: %v %q", err, f.log)
	}
	f = &fakePaths{}
	if err := writeDoc(newDocument(&pathDoc{t: f.target(false)}, maxPathDoc), []byte("--content\n"), nil); err != nil || !slices.Equal(f.log, []string{"--content"}) {
		t.Fatalf("--content is a path for warmup: %v %q", err, f.log)
	}
}

// TestConfigIsTheWholeDocumentHoweverItIsWritten: bash's printf writes a
// line per call; the job's config ends as the whole document, and a bad
// line puts back the config the job had.
func TestConfigIsTheWholeDocumentHoweverItIsWritten(t *testing.T) {
	const initial = "batch_size=32\nseed=0\nsampler=ods\nsubset=all\n"
	f := &fakeConfig{cfg: initial}
	d := newDocument(f.sink(), maxConfigDoc)
	for _, l := range []string{"batch_size=256\n", "seed=7\n", "sampler=random\n"} {
		if err := d.write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.close(); err != nil || f.cfg != "batch_size=256\nseed=7\nsampler=random\nsubset=all\n" {
		t.Fatalf("config %q, %v", f.cfg, err)
	}
	if f.applies != 1 {
		t.Fatalf("a document of 3 writes and a close was applied %d times, want once", f.applies)
	}
	f = &fakeConfig{cfg: initial}
	d = newDocument(f.sink(), maxConfigDoc)
	d.write([]byte("batch_size=64\n"))
	if err := d.write([]byte("colour=blue\n")); !errors.Is(err, jobs.ErrInvalid) || f.cfg != initial {
		t.Fatalf("a bad line: %v, config %q; want EINVAL and the config as it was", err, f.cfg)
	}
	// A subset that names nothing fails the write that ends its line.
	f = &fakeConfig{cfg: initial}
	d = newDocument(f.sink(), maxConfigDoc)
	d.write([]byte("batch_size=64\nsubset=good\n"))
	if err := d.write([]byte("subset=bad\n")); !errors.Is(err, jobs.ErrInvalid) || f.cfg != initial {
		t.Fatalf("a subset naming nothing: %v, config %q; want EINVAL and the config as it was", err, f.cfg)
	}
	// Applied at a close, put back when a later line is refused.
	f = &fakeConfig{cfg: initial}
	d = newDocument(f.sink(), maxConfigDoc)
	d.write([]byte("batch_size=64\n"))
	if err := d.close(); err != nil || !strings.HasPrefix(f.cfg, "batch_size=64\n") {
		t.Fatalf("close: %v, config %q", err, f.cfg)
	}
	if err := d.write([]byte("seed=x\n")); !errors.Is(err, jobs.ErrInvalid) || f.cfg != initial {
		t.Fatalf("a bad line after a close: %v, config %q; want EINVAL and the config as before the document", err, f.cfg)
	}
	// A config without a final newline is applied at the close.
	f = &fakeConfig{cfg: initial}
	d = newDocument(f.sink(), maxConfigDoc)
	d.write([]byte("seed=9\nbatch_si"))
	d.write([]byte("ze=3"))
	if err := d.close(); err != nil || f.cfg != "batch_size=3\nseed=9\nsampler=ods\nsubset=all\n" {
		t.Fatalf("config %q, %v", f.cfg, err)
	}
}

// splits turns fuzz bytes into write sizes.
func splits(seed uint64, n int) []int {
	r := rand.New(rand.NewPCG(seed, 7))
	var out []int
	for left := n; left > 0; {
		k := 1 + r.IntN(min(left, 64))
		if r.IntN(8) == 0 {
			k = min(left, 1+r.IntN(4096))
		}
		out = append(out, k)
		left -= k
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzDocumentSplitsEqualOneWrite: a document written in any sizes of
// write(2) call has the effect of one write: the same paths queued (or
// none), the same config (or the one before), the same first error.
func FuzzDocumentSplitsEqualOneWrite(f *testing.F) {
	for _, s := range []string{
		"a\nb\nc\n", "all\n", "good\nbad\n", "x\nall", "# c\n\n", "\"a\\nb\"\n\" s \"\n", "a\x00b\n", "--content\nq\n",
		"batch_size=256\nseed=7\nsampler=ods\n", "batch_size=1\nbatch_size=2\n", "seed=x\n", "subset=a\nsubset=b\n", "subset=bad\n",
	} {
		f.Add([]byte(s), uint64(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		if len(data) > 8<<10 {
			return
		}
		cuts := splits(seed, len(data))

		// Every document is charged to a user's budget, large enough not to
		// refuse these; whatever happens, the budget is given back whole.
		budget := &docBudget{max: 1 << 20}
		defer func() {
			if n := budget.total(); n != 0 {
				t.Fatalf("%q in writes of %v: %d bytes still charged after the documents ended", data, cuts, n)
			}
		}()
		for _, content := range []bool{false, true} {
			one, many := &fakePaths{}, &fakePaths{}
			err1 := writeDoc(newBudgetedDocument(&pathDoc{t: one.target(content)}, maxPathDoc, budget, 1000), data, nil)
			errN := writeDoc(newBudgetedDocument(&pathDoc{t: many.target(content)}, maxPathDoc, budget, 1000), data, cuts)
			if errText(err1) != errText(errN) || !slices.Equal(one.log, many.log) {
				t.Fatalf("paths %q in writes of %v: %v %q; in one write: %v %q", data, cuts, errN, many.log, err1, one.log)
			}
			if err1 != nil && (one.log != nil || one.held != nil || !errors.Is(err1, errInvalid)) {
				t.Fatalf("a rejected document applied %q (%v)", one.log, err1)
			}
		}

		const initial = "batch_size=5\nseed=1\nsampler=sequential\nsubset=all\n"
		one, many := &fakeConfig{cfg: initial}, &fakeConfig{cfg: initial}
		err1 := writeDoc(newBudgetedDocument(one.sink(), maxConfigDoc, budget, 1000), data, nil)
		errN := writeDoc(newBudgetedDocument(many.sink(), maxConfigDoc, budget, 1000), data, cuts)
		if errText(err1) != errText(errN) || one.cfg != many.cfg {
			t.Fatalf("config %q in writes of %v: %v %q; in one write: %v %q", data, cuts, errN, many.cfg, err1, one.cfg)
		}
		if err1 != nil && one.cfg != initial {
			t.Fatalf("a rejected config left %q", one.cfg)
		}
	})
}

// TestSupplementaryGroupsComeFromTheCallersProcess: the groups are taken
// only from a process whose fs uid and gid are the request's.
func TestSupplementaryGroupsComeFromTheCallersProcess(t *testing.T) {
	groups, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	pid, uid, gid := uint32(os.Getpid()), uint32(os.Getuid()), uint32(os.Getgid())
	got := procGroups(pid, uid, gid)
	if len(got) != len(groups) {
		t.Fatalf("groups %v, want %v", got, groups)
	}
	for i, g := range groups {
		if got[i] != uint32(g) {
			t.Fatalf("groups %v, want %v", got, groups)
		}
	}
	if got := procGroups(pid, uid+1, gid); got != nil {
		t.Fatalf("another uid's request got this process's groups %v", got)
	}
	if got := procGroups(pid, uid, gid+1); got != nil {
		t.Fatalf("another gid's request got this process's groups %v", got)
	}
}

// TestARejectedResumePutsTheJobBack: a resume document applied at a close
// and then rejected (a later write through the same open) puts the job
// back: resumed from its earlier state if it had one, else started over.
func TestARejectedResumePutsTheJobBack(t *testing.T) {
	for _, earlier := range []*jobs.ResumePoint{nil, {}} {
		var applied []string
		var undone []*jobs.ResumePoint
		sink := &resumeDoc{
			apply: func(text []byte) error {
				if bytes.Contains(text, []byte("junk")) {
					return errors.New("refused")
				}
				applied = append(applied, string(text))
				return nil
			},
			previous: func() *jobs.ResumePoint { return earlier },
			undo:     func(pt *jobs.ResumePoint) error { undone = append(undone, pt); return nil },
		}
		d := newDocument(sink, maxStateDoc)
		if err := d.write([]byte("good state\n")); err != nil || d.close() != nil {
			t.Fatalf("the good document: %v", err)
		}
		if err := d.write([]byte("junk\n")); err != nil {
			t.Fatal(err) // lines are taken at the close
		}
		if err := d.close(); err == nil {
			t.Fatal("the document with junk was taken")
		}
		if len(applied) != 1 || len(undone) != 1 || undone[0] != earlier {
			t.Errorf("earlier %v: applied %q, undone to %v; want the job put back to what it resumed from before", earlier, applied, undone)
		}
	}
}

// TestOneUsersDocumentsShareABudgetAndGiveItBack: a user's documents held
// open are charged together; past the budget the write fails (EDQUOT) and
// rejects that document, which gives back what it held; an ended
// document gives back everything; root is not charged; another user has
// a budget of their own.
func TestOneUsersDocumentsShareABudgetAndGiveItBack(t *testing.T) {
	b := &docBudget{max: 100}
	f := &fakePaths{}
	d1 := newBudgetedDocument(&pathDoc{t: f.target(false)}, maxPathDoc, b, 7)
	d2 := newBudgetedDocument(&pathDoc{t: f.target(false)}, maxPathDoc, b, 7)
	if err := d1.write(bytes.Repeat([]byte("a"), 60)); err != nil {
		t.Fatal(err)
	}
	if err := d2.write(bytes.Repeat([]byte("b"), 60)); !errors.Is(err, errDocBudget) {
		t.Fatalf("a second document past the user's budget: %v, want errDocBudget", err)
	}
	if got := b.total(); got < 60 || got > 100 {
		t.Fatalf("charged %d after the refusal, want what the first document holds", got)
	}
	other := newBudgetedDocument(&pathDoc{t: f.target(false)}, maxPathDoc, b, 8)
	if err := other.write(bytes.Repeat([]byte("c"), 60)); err != nil {
		t.Fatalf("another user: %v", err)
	}
	root := newBudgetedDocument(&pathDoc{t: f.target(false)}, maxPathDoc, b, 0)
	if err := root.write(bytes.Repeat([]byte("r"), 1000)); err != nil {
		t.Fatalf("root: %v", err)
	}
	d1.release()
	d2.release()
	other.release()
	root.release()
	if got := b.total(); got != 0 {
		t.Fatalf("%d bytes charged after every document ended", got)
	}
}

// TestAConfigChecksEachSubsetPrefixOnce: a document that repeats a subset
// line, written a line per write, checks that prefix against the dataset
// once and applies the config once per close: its cost is its lines, not
// its lines times the dataset.
func TestAConfigChecksEachSubsetPrefixOnce(t *testing.T) {
	f := &fakeConfig{cfg: "batch_size=32\n"}
	sink := f.sink().(*configDoc)
	checks := 0
	inner := sink.subset
	sink.subset = func(prefix string) (int, error) { checks++; return inner(prefix) }
	d := newDocument(sink, maxConfigDoc)
	for i := range 10000 {
		line := "subset=a\n"
		if i%2 == 1 {
			line = "# a comment\n"
		}
		if err := d.write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.close(); err != nil {
		t.Fatal(err)
	}
	if checks != 1 || f.applies != 1 {
		t.Fatalf("10,000 lines of one prefix: %d checks of it, %d applies; want 1 and 1", checks, f.applies)
	}
	if c, _ := jobs.ParseConfig([]byte(f.cfg)); len(c.Subset) != 1 {
		t.Fatalf("the applied config has %d subset prefixes, want 1: %q", len(c.Subset), f.cfg)
	}
}

// TestALineThatNamesManyFilesIsChargedAtOnce: a path line naming a large
// directory makes the document hold a pointer per file; one write of many
// such lines is refused at the line that crosses the budget, not after it
// allocated them all; a path line longer than 64 KiB is refused.
func TestALineThatNamesManyFilesIsChargedAtOnce(t *testing.T) {
	many := make([]*catalog.Entry, 10000)
	for i := range many {
		many[i] = catalog.NewFile("d/f", catalog.Attr{})
	}
	lines := 0
	target := pathTarget{
		resolve: func(p string) ([]*catalog.Entry, error) { lines++; return many, nil },
		hold: func(req pathRequest) (heldRequest, error) {
			return heldRequest{release: func() error { return nil }, cancel: func() {}}, nil
		},
	}
	b := &docBudget{max: 1 << 20}
	d := newBudgetedDocument(&pathDoc{t: target}, maxPathDoc, b, 7)
	err := d.write(bytes.Repeat([]byte("d\n"), 100))
	if !errors.Is(err, errDocBudget) || lines > 14 {
		t.Fatalf("100 lines of 10,000 files each in a budget of 1 MiB: %v after %d lines, want errDocBudget by the 14th", err, lines)
	}
	d.release()
	if b.total() != 0 {
		t.Fatalf("%d bytes still charged", b.total())
	}
	d = newBudgetedDocument(&pathDoc{t: target}, maxPathDoc, b, 7)
	d.lineMax = maxPathLine
	if err := d.write(bytes.Repeat([]byte("x"), maxPathLine+1)); !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), "a line longer than") {
		t.Fatalf("a line of %d bytes: %v", maxPathLine+1, err)
	}
}

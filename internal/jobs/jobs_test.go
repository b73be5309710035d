package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/tier"
	"github.com/epochfs/epochfs/internal/views"

	"github.com/epochfs/epochfs/internal/testenv"
)

// newManager builds a source of n small files under two classes, a
// catalog, a placer and a manager over them.
func newManager(t testing.TB, n int) (*Manager, []string) {
	t.Helper()
	var paths []string
	for i := 0; i < n; i++ {
		paths = append(paths, fmt.Sprintf("c%d/img%03d.jpg", i%2, i))
	}
	return newManagerOf(t, paths, nil), paths
}

// newManagerWith is newManager with manager options (the placer is set).
func newManagerWith(t testing.TB, n int, o Options) (*Manager, []string) {
	t.Helper()
	var paths []string
	for i := 0; i < n; i++ {
		paths = append(paths, fmt.Sprintf("c%d/img%03d.jpg", i%2, i))
	}
	return newManagerOpts(t, paths, nil, o, nil), paths
}

// newManagerOf builds a source of the given files (prepare may change the
// tree before the catalog walks it), a catalog, a placer and a manager.
func newManagerOf(t testing.TB, paths []string, prepare func(src string)) *Manager {
	t.Helper()
	return newManagerOpts(t, paths, prepare, Options{}, nil)
}

// withViews, if set, makes the manager's views over its placer (the
// engine's finish hook is installed as daemon.New installs it).
func newManagerOpts(t testing.TB, paths []string, prepare func(src string), o Options, withViews func(*placement.Placer) (*views.Set, *preprocess.Engine)) *Manager {
	t.Helper()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	for i, p := range paths {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(strings.Repeat("x", 100+i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if prepare != nil {
		prepare(src)
	}
	cat, err := catalog.Open(context.Background(), catalog.Options{StateDir: filepath.Join(base, "state"), Source: src, Tiers: []string{"mem"}})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tier.Open(tier.Options{Name: "mem", Dir: filepath.Join(base, "tier"), Quota: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	source, err := source.Open(source.Options{Root: src})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { source.Close() })
	p, err := placement.New(placement.Options{Catalog: cat, Source: source, Tiers: []*tier.Tier{tr}, Workers: 1, BufferBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	o.Placer = p
	var eng *preprocess.Engine
	if withViews != nil {
		o.Views, eng = withViews(p)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	// The hooks, as daemon.New installs them.
	demand, finished := m.Hooks()
	if demand != nil {
		p.Buffer().SetDemandHook(demand)
	}
	if finished != nil && eng != nil {
		eng.OnFinish(finished)
	}
	t.Cleanup(func() {
		p.Buffer().SetDemandHook(nil)
		m.Close()
		p.Close()
		cat.Close()
		filepath.Walk(src, func(p string, _ os.FileInfo, _ error) error { os.Chmod(p, 0o755); return nil })
	})
	slices.Sort(paths)
	return m
}

// epoch reads batches until the end of the epoch and returns the paths.
func epoch(t testing.TB, m *Manager, name string) []string {
	t.Helper()
	var out []string
	for i := 0; ; i++ {
		b, end, err := m.Next(context.Background(), jr(m, name))
		if err != nil {
			t.Fatal(err)
		}
		if end {
			if len(b) != 0 {
				t.Fatal("end of epoch with paths")
			}
			return out
		}
		if len(b) == 0 || b[len(b)-1] != '\n' {
			t.Fatalf("batch %q: want newline-terminated paths", b)
		}
		out = append(out, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
		if i > 10000 {
			t.Fatal("epoch does not end")
		}
	}
}

func sortedEqual(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestBadJobNamesAreRejected(t *testing.T) {
	m, _ := newManager(t, 4)
	for _, n := range []string{"", ".", "..", "a/b", "../x", "a b", "ü", strings.Repeat("x", 65), "a\x00"} {
		if _, err := m.Register(n, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("Register(%q) = %v, want ErrInvalid", n, err)
		}
	}
	if len(m.Jobs()) != 0 {
		t.Fatalf("jobs %v after rejected names", m.Jobs())
	}
	for _, n := range []string{"a", "resnet-50_v1.2", strings.Repeat("x", 64)} {
		if _, err := m.Register(n, nil); err != nil {
			t.Errorf("Register(%q): %v", n, err)
		}
	}
	if _, err := m.Register("a", nil); !errors.Is(err, ErrExists) {
		t.Fatalf("second Register: %v, want ErrExists", err)
	}
	if err := m.End("nope"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("End of unknown: %v", err)
	}
}

func TestBadConfigChangesNothing(t *testing.T) {
	m, _ := newManager(t, 10)
	if _, err := m.Register("j", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Configure(jr(m, "j"), []byte("batch_size=3\nseed=5\nsampler=random\n")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Next(context.Background(), jr(m, "j")); err != nil {
		t.Fatal(err)
	}
	before, _ := m.Config(jr(m, "j"))
	stBefore, _ := m.Status(jr(m, "j"))
	for _, bad := range []string{
		"batch_size=0", "batch_size=-1", "batch_size=x", "colour=blue", "sampler=lru",
		"subset=nothing/here", "subset=c0\nsubset=nope", "seed=-3", "novalue", "subset=../c0",
	} {
		if err := m.Configure(jr(m, "j"), []byte(bad+"\n")); !errors.Is(err, ErrInvalid) {
			t.Errorf("Configure(%q) = %v, want ErrInvalid", bad, err)
		}
		after, _ := m.Config(jr(m, "j"))
		stAfter, _ := m.Status(jr(m, "j"))
		if string(after) != string(before) || string(stAfter.Bytes()) != string(stBefore.Bytes()) {
			t.Fatalf("Configure(%q) changed the job:\n%s\n%s", bad, after, stAfter.Bytes())
		}
	}
	if err := m.Configure(jr(m, "nope"), []byte("batch_size=1\n")); !errors.Is(err, ErrNoJob) {
		t.Fatalf("Configure of unknown job: %v", err)
	}
}

func TestSubsetPrefixesResolveToTheirFiles(t *testing.T) {
	m, paths := newManager(t, 12)
	if _, err := m.Register("j", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Configure(jr(m, "j"), []byte("batch_size=4\nsubset=c1\nsubset=/c0/img000.jpg/\n")); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range paths {
		if strings.HasPrefix(p, "c1/") || p == "c0/img000.jpg" {
			want = append(want, p)
		}
	}
	got := epoch(t, m, "j")
	if !sortedEqual(got, want) {
		t.Fatalf("subset epoch %v, want %v", got, want)
	}
	// "c" is not a path component prefix of "c0".
	if err := m.Configure(jr(m, "j"), []byte("subset=c\n")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("subset=c: %v, want ErrInvalid", err)
	}
	cfg, _ := m.Config(jr(m, "j"))
	if !strings.Contains(string(cfg), "subset=c1\n") {
		t.Fatalf("config %q lost its subset", cfg)
	}
}

func TestEveryPathExactlyOncePerEpochAndEndOfEpochOnce(t *testing.T) {
	m, paths := newManager(t, 37)
	for _, kind := range []string{"ods", "random", "sequential"} {
		name := "j-" + kind
		if _, err := m.Register(name, nil); err != nil {
			t.Fatal(err)
		}
		if err := m.Configure(jr(m, name), []byte("batch_size=5\nseed=9\nsampler="+kind+"\n")); err != nil {
			t.Fatal(err)
		}
		var prev []string
		for ep := 1; ep <= 3; ep++ {
			got := epoch(t, m, name)
			if len(got) != len(paths) || !sortedEqual(got, paths) {
				t.Fatalf("%s epoch %d: %d paths, not a permutation of the %d files", kind, ep, len(got), len(paths))
			}
			if kind != "sequential" && prev != nil && slices.Equal(prev, got) {
				t.Fatalf("%s: epoch %d repeats the previous order", kind, ep)
			}
			if kind == "sequential" && !slices.Equal(got, paths) {
				t.Fatalf("sequential epoch not in path order: %v", got)
			}
			prev = got
			st, _ := m.Status(jr(m, name))
			if st.IntOf("epoch") != int64(ep) {
				t.Fatalf("status after epoch %d:\n%s", ep, st.Bytes())
			}
		}
	}
}

func TestDefaultsAndEnd(t *testing.T) {
	m, paths := newManager(t, 40)
	if _, err := m.Register("j", nil); err != nil {
		t.Fatal(err)
	}
	cfg, _ := m.Config(jr(m, "j"))
	if !strings.Contains(string(cfg), fmt.Sprintf("batch_size=%d\n", DefaultBatchSize)) || !strings.Contains(string(cfg), "sampler=ods\n") {
		t.Fatalf("default config %q", cfg)
	}
	if err := m.Configure(jr(m, "j"), []byte("seed=3\n")); err != nil {
		t.Fatal(err)
	}
	b, _, err := m.Next(context.Background(), jr(m, "j"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != min(DefaultBatchSize, len(paths)) {
		t.Fatalf("first batch has %d paths, want the default batch size", n)
	}
	if err := m.End("j"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Next(context.Background(), jr(m, "j")); !errors.Is(err, ErrNoJob) {
		t.Fatalf("Next after End: %v", err)
	}
	if _, ok := m.Lookup("j"); ok {
		t.Fatal("job still listed")
	}
}

func FuzzJobNamesAndConfigs(f *testing.F) {
	f.Add("j", []byte("batch_size=4\nseed=1\nsampler=ods\n"))
	f.Add("..", []byte("subset=c0\n"))
	f.Add("a/b", []byte("batch_size=0\n"))
	f.Add("x", []byte("subset=nothing\nbatch_size=2\n"))
	f.Add("y", []byte("sampler=random\nsubset=all\n#c\n\n"))
	m, paths := newManager(f, 9)
	f.Fuzz(func(t *testing.T, name string, cfg []byte) {
		if _, err := m.Register(name, nil); err != nil {
			if CheckName(name) == nil && !errors.Is(err, ErrExists) && !errors.Is(err, ErrTooMany) {
				t.Fatalf("Register(%q) of a valid name: %v", name, err)
			}
			if _, ok := m.Lookup(name); ok && CheckName(name) != nil {
				t.Fatalf("invalid name %q registered", name)
			}
			return
		}
		defer m.End(name)
		before, _ := m.Config(jr(m, name))
		if err := m.Configure(jr(m, name), cfg); err != nil {
			after, _ := m.Config(jr(m, name))
			if string(after) != string(before) {
				t.Fatalf("rejected config %q changed %q to %q", cfg, before, after)
			}
		}
		got := epoch(t, m, name)
		if len(got) == 0 || len(got) > len(paths) {
			t.Fatalf("epoch of %d paths", len(got))
		}
		seen := map[string]bool{}
		for _, p := range got {
			if seen[p] || !slices.Contains(paths, p) {
				t.Fatalf("path %q repeated or unknown", p)
			}
			seen[p] = true
		}
	})
}

// TestNamesThatAreNotLinesComeQuotedFromNext: a newline, a leading '#',
// surrounding spaces or a quote in a name: every line of next is one path,
// and unquoting it gives the name; every name comes once per epoch.
func TestNamesThatAreNotLinesComeQuotedFromNext(t *testing.T) {
	paths := []string{"c/a\nb", "c/new\nline", "#hash", " lead", "trail ", "\"quoted\"", "c/back\\slash", "c/plain"}
	m := newManagerOf(t, paths, nil)
	if _, err := m.Register("j", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Configure(jr(m, "j"), []byte("batch_size=3\nsampler=random\n")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range epoch(t, m, "j") {
		p, err := ctlpath.Unquote(line)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got = append(got, p)
	}
	if !sortedEqual(got, paths) {
		t.Fatalf("an epoch gave %q, want every one of %q", got, paths)
	}
	// A subset names them quoted.
	if err := m.Configure(jr(m, "j"), []byte("sampler=sequential\nsubset="+ctlpath.Quote(" lead")+"\nsubset="+ctlpath.Quote("c/new\nline")+"\n")); err != nil {
		t.Fatal(err)
	}
	if got := epoch(t, m, "j"); !slices.Equal(got, []string{ctlpath.Quote(" lead"), ctlpath.Quote("c/new\nline")}) {
		t.Fatalf("the quoted subset gave %q", got)
	}
	cfg, _ := m.Config(jr(m, "j"))
	if !strings.Contains(string(cfg), "subset="+ctlpath.Quote(" lead")+"\n") {
		t.Fatalf("config does not show the subset as written:\n%s", cfg)
	}
}

// TestAJobSeesOnlyWhatItsOwnerMayOpen: a user's job never hands out, nor
// confirms in its config, a file its owner could not open.
func TestAJobSeesOnlyWhatItsOwnerMayOpen(t *testing.T) {
	paths := []string{"pub/a", "pub/b", "secret/x", "secret/y", "pub/mine"}
	const uid, gid = 4242, 4242
	m := newManagerOf(t, paths, func(src string) {
		os.Chmod(filepath.Join(src, "secret"), 0o700)
		os.Chmod(filepath.Join(src, "pub/b"), 0o600)
		os.Chown(filepath.Join(src, "pub/mine"), uid, gid)
		os.Chmod(filepath.Join(src, "pub/mine"), 0o600)
	})
	if os.Geteuid() != 0 {
		testenv.Skip(t, "needs root to chown")
	}
	who := &catalog.Cred{UID: uid, GID: gid}
	if _, err := m.Register("u", who); err != nil {
		t.Fatal(err)
	}
	if err := m.Configure(jr(m, "u"), []byte("batch_size=2\nsampler=random\n")); err != nil {
		t.Fatal(err)
	}
	if got, want := epoch(t, m, "u"), []string{"pub/a", "pub/mine"}; !sortedEqual(got, want) {
		t.Fatalf("the user's job handed out %q, want %q", got, want)
	}
	var msgs []string
	for _, sub := range []string{"secret", "secret/x", "pub/b", "no/such"} {
		err := m.Configure(jr(m, "u"), []byte("subset="+sub+"\n"))
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("subset=%s: %v, want ErrInvalid", sub, err)
		}
		msgs = append(msgs, strings.Replace(err.Error(), sub, "PATH", 1))
	}
	for _, msg := range msgs[1:] {
		if msg != msgs[0] {
			t.Fatalf("a hidden subset and a missing one answer differently: %q", msgs)
		}
	}
	if err := m.Configure(jr(m, "u"), []byte("subset=pub\nsampler=sequential\n")); err != nil {
		t.Fatal(err)
	}
	if got := epoch(t, m, "u"); !slices.Equal(got, []string{"pub/a", "pub/mine"}) {
		t.Fatalf("subset=pub gave %q", got)
	}
	// Root's job sees everything.
	if _, err := m.Register("r", nil); err != nil {
		t.Fatal(err)
	}
	if got := epoch(t, m, "r"); !sortedEqual(got, paths) {
		t.Fatalf("root's job handed out %q", got)
	}
	// A user who may read nothing cannot register a job.
	m2 := newManagerOf(t, []string{"secret/z"}, func(src string) { os.Chmod(filepath.Join(src, "secret"), 0o700) })
	if _, err := m2.Register("v", who); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a job of no readable file: %v, want ErrInvalid", err)
	}
}

// jr is the Ref of the live job name of m (one that names no job if there
// is none).
func jr(m *Manager, name string) Ref {
	if in, ok := m.Lookup(name); ok {
		return in.Ref()
	}
	return Ref{Name: name}
}

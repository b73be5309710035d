package mount

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/test/faultfs"
)

// makeWide writes dirs directories of files each (small files), and
// returns the sorted file paths.
func makeWide(t *testing.T, dirs, files int) (string, []string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	var paths []string
	for d := 0; d < dirs; d++ {
		for f := 0; f < files; f++ {
			p := fmt.Sprintf("d%03d/f%03d.bin", d, f)
			full := filepath.Join(src, p)
			if f == 0 {
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return src, paths
}

// A first mount serves before the walk of its source ends: over a source
// whose directory reads take 200 ms each, the mount is up well before the
// walk could have read its 60 directories (16 at a time), an unwalked directory lists and
// reads correctly (read from the source on demand), status answers with the
// walk's progress, a job's mkdir waits for the walk, and the finished
// catalog is the one a walk-first mount builds. The walk is the one with
// stats (placement.walk = "stat"), where a job waits for the whole walk;
// a walk of names first is TestAWalkOfNamesFirstStartsJobsBeforeTheAttributes.
func TestTheMountServesWhileTheSourceIsWalked(t *testing.T) {
	requireFUSE(t)
	dir, paths := makeWide(t, 60, 10)
	start := time.Now()
	e, f := faultMount(t, dir, func(f *faultfs.FS, e *env) {
		walkSlowly(200*time.Millisecond)(f, e)
		e.opts.walkStat = true
	})
	up := time.Since(start)
	t.Logf("source and mount up in %v", up)
	if !e.cat.Walking() {
		t.Fatalf("the walk of 60 directories at 200 ms each was over when the mount returned (%v)", up)
	}
	st := e.status()
	if st["catalog"] != "walking" || st["walk_dirs_pending"] == "0" {
		t.Errorf("status during the walk: catalog=%s walk_entries=%s walk_dirs_pending=%s", st["catalog"], st["walk_entries"], st["walk_dirs_pending"])
	}
	// The last directory in path order: the walk reaches it last.
	last := "d059"
	names, err := os.ReadDir(filepath.Join(e.mnt, last))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 10 || names[0].Name() != "f000.bin" {
		t.Errorf("ls of an unwalked directory: %d entries, first %v", len(names), names)
	}
	// ls through the shell, and a read, during the walk.
	out, err := exec.Command("bash", "-c", "ls -A "+filepath.Join(e.mnt, "d058")+" | wc -l").Output()
	if err != nil || strings.TrimSpace(string(out)) != "10" {
		t.Errorf("bash ls -A of an unwalked directory: %q, %v", out, err)
	}
	got, err := os.ReadFile(filepath.Join(e.mnt, "d057", "f009.bin"))
	if err != nil || string(got) != "d057/f009.bin" {
		t.Errorf("read during the walk: %q, %v", got, err)
	}
	if !e.cat.Walking() {
		t.Log("the walk ended during the checks; they ran against a partial tree only in part")
	}
	// A job numbers the files: its mkdir waits for the walk.
	if err := os.Mkdir(filepath.Join(e.mnt, ".epochfs", "jobs", "j"), 0o755); err != nil {
		t.Fatalf("mkdir of a job during the walk: %v", err)
	}
	if e.cat.Walking() {
		t.Error("a job was created before the walk ended")
	}
	st = e.status()
	if st["catalog"] != "ok" || st["walk_dirs_pending"] != "0" || st["files_total"] != fmt.Sprint(len(paths)) {
		t.Errorf("status after the walk: catalog=%s walk_dirs_pending=%s files_total=%s, want ok, 0, %d",
			st["catalog"], st["walk_dirs_pending"], st["files_total"], len(paths))
	}
	bg := treeOf(e.cat)
	ids := map[uint64]string{}
	e.cat.Root().Files(func(en *catalog.Entry) bool {
		if prev, dup := ids[en.ID()]; dup {
			t.Errorf("%s and %s share the ID %d", prev, en.Path(), en.ID())
		}
		ids[en.ID()] = en.Path()
		return true
	})
	// The same source walked first: the same tree, the same numbering.
	f.Delay("readdir", 0)
	e.unmount()
	w := newEnv(t, f.Mnt(), 1<<30)
	w.mount()
	if first := treeOf(w.cat); !slices.Equal(bg, first) {
		t.Errorf("the catalog built while serving differs from a walk-first one:\n%v\n%v", bg, first)
	}
	// And the one stored is complete: a remount loads it without a walk.
	w.unmount()
	e2 := newEnv(t, f.Mnt(), 1<<30)
	e2.state = e.state
	e2.opts.serveWhileWalking = true
	e2.mount()
	if e2.cat.Walked() {
		t.Error("the remount walked the source again: the background walk's catalog was not stored complete")
	}
	if err := e2.cat.WaitWalk(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := e2.cat.Files(); n != int64(len(paths)) {
		t.Errorf("the stored catalog has %d files, want %d", n, len(paths))
	}
}

// walkSlowly delays the source's directory reads by d and mounts without
// waiting for the walk.
func walkSlowly(d time.Duration) func(*faultfs.FS, *env) {
	return func(f *faultfs.FS, e *env) {
		f.Delay("readdir", d)
		e.opts.serveWhileWalking = true
	}
}

// treeOf lists a catalog's files as path:size:index, in path order.
func treeOf(cat *catalog.Catalog) []string {
	var out []string
	cat.Root().Files(func(en *catalog.Entry) bool {
		out = append(out, fmt.Sprintf("%s:%d:%d", en.Path(), en.Attr().Size, en.Index))
		return true
	})
	return out
}

// Closing a mount while its walk runs stops the walk, stores nothing
// complete, and the next mount walks again.
func TestAMountClosedDuringItsWalkWalksAgainNextTime(t *testing.T) {
	requireFUSE(t)
	dir, paths := makeWide(t, 30, 5)
	e, f := faultMount(t, dir, walkSlowly(100*time.Millisecond))
	if !e.cat.Walking() {
		t.Fatal("the walk was over at once")
	}
	e.unmount()
	f.Delay("readdir", 0)
	e.opts.serveWhileWalking = false
	e.mount()
	if !e.cat.Walked() {
		t.Error("the mount after a walk cut short loaded a catalog instead of walking")
	}
	if n := e.cat.Files(); n != int64(len(paths)) {
		t.Errorf("%d files after the second walk, want %d", n, len(paths))
	}
	if err := e.cat.WaitWalk(context.Background()); err != nil {
		t.Error(err)
	}
}

// The CLI: a plain mount returns while the walk runs (status says so),
// mount --wait-walk returns once it is over, and says so.
func TestMountReturnsBeforeTheWalkAndWaitWalkAfterIt(t *testing.T) {
	requireFUSE(t)
	dir, paths := makeWide(t, 60, 3)
	f := faultfs.Start(t, dir)
	f.Delay("readdir", 200*time.Millisecond)
	for _, wait := range []bool{false, true} {
		base := t.TempDir()
		mnt := filepath.Join(base, "mnt")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		var extra []string
		if wait {
			extra = append(extra, "--wait-walk")
		}
		args := append([]string{"mount", "--state", filepath.Join(base, "state"), "--tier=disk=" + filepath.Join(base, "tier") + ":1GiB"}, extra...)
		code, out := cli(t, append(args, f.Mnt(), mnt)...)
		if code != 0 {
			t.Fatalf("mount %v: exit %d: %s", extra, code, out)
		}
		st := statusOf(t, mnt)
		switch {
		case !wait && st["catalog"] != "walking":
			t.Errorf("a plain mount returned after the walk of 60 directories at 200 ms each (catalog=%s)", st["catalog"])
		case wait && (st["catalog"] != "ok" || st["files_total"] != fmt.Sprint(len(paths))):
			t.Errorf("mount --wait-walk returned with catalog=%s files_total=%s, want ok and %d", st["catalog"], st["files_total"], len(paths))
		case wait && !strings.Contains(out, "catalog complete: "+fmt.Sprint(len(paths))+" files"):
			t.Errorf("mount --wait-walk did not say the walk ended: %s", out)
		}
		if !wait {
			// Scripts write ctl files during the walk: the write of
			// "all" to warmup (bash, then Python) waits for the walk
			// and succeeds, and then covers every file.
			warm := filepath.Join(mnt, ".epochfs", "warmup")
			if out, err := exec.Command("bash", "-c", "echo all > "+warm).CombinedOutput(); err != nil {
				t.Errorf("bash echo all > warmup during the walk: %v: %s", err, out)
			}
			if st := statusOf(t, mnt); st["catalog"] == "walking" {
				t.Error("a warmup write returned before the walk ended")
			}
			py := "import sys\nwith open(sys.argv[1], 'w') as f:\n    f.write('all\\n')\n"
			if out, err := exec.Command("/usr/bin/python3", "-c", py, warm).CombinedOutput(); err != nil {
				t.Errorf("python write of warmup: %v: %s", err, out)
			}
			waitFor(t, func() bool { return statusOf(t, mnt)["files_resident"] == fmt.Sprint(len(paths)) })
		}
		if code, out := cli(t, "unmount", mnt); code != 0 {
			t.Fatalf("unmount: exit %d: %s", code, out)
		}
	}
}

// A remount serves before its catalog is loaded: with the load held after
// the root, status says catalog=loading, directories list through bash and
// find -printf (read from the stored records on demand), resident files
// read from their tier copies (no copy started, none accounted yet), and a
// job's mkdir and a warmup wait for the load; once it ends every copy is
// checked and accounted, the prewarm registers the copies nobody opened,
// and the catalog is the one a blocking load builds.
func TestARemountServesWhileItsCatalogLoads(t *testing.T) {
	requireFUSE(t)
	src, paths := makeWide(t, 60, 10)
	e := newEnv(t, src, 1<<30)
	e.mount()
	e.warm()
	want := treeOf(e.cat)
	e.unmount()

	e.opts.serveWhileWalking = true
	e.opts.loadHold = make(chan struct{})
	e.opts.prewarm = true
	e.mount()
	if !e.cat.Loading() || e.cat.Walked() {
		t.Fatalf("the remount is not loading its catalog in the background (loading %v, walked %v)", e.cat.Loading(), e.cat.Walked())
	}
	if st := e.status(); st["catalog"] != "loading" {
		t.Errorf("status during the load: catalog=%s, want loading", st["catalog"])
	}
	out, err := exec.Command("bash", "-c", "ls -A "+filepath.Join(e.mnt, "d059")+" | wc -l").Output()
	if err != nil || strings.TrimSpace(string(out)) != "10" {
		t.Errorf("bash ls -A during the load: %q, %v", out, err)
	}
	out, err = exec.Command("find", filepath.Join(e.mnt, "d030"), "-type", "f", "-printf", "%s %P\n").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(lines)
	if len(lines) != 10 || lines[0] != fmt.Sprintf("%d f000.bin", len("d030/f000.bin")) {
		t.Errorf("find -printf during the load: %q", lines)
	}
	opens := e.srcd.Stats().Opens
	for _, p := range paths[400:450] {
		got, err := os.ReadFile(filepath.Join(e.mnt, p))
		if err != nil || string(got) != p {
			t.Errorf("read %s during the load: %q, %v", p, got, err)
		}
	}
	if n := e.srcd.Stats().Opens - opens; n != 0 {
		t.Errorf("%d source opens for resident files during the load, want 0 (their tier copies)", n)
	}
	if st := e.p.Stats(); st.Done != 0 || st.CopiesCheckedAtMount != 0 {
		t.Errorf("copies made or checked during the load: %+v", st)
	}
	made, warmed := make(chan error, 1), make(chan error, 1)
	go func() { made <- os.Mkdir(filepath.Join(e.mnt, ".epochfs", "jobs", "j"), 0o755) }()
	go func() {
		// As `epochfs warmup --wait` writes it: through bash.
		warmed <- exec.Command("bash", "-c", "echo all > "+filepath.Join(e.mnt, ".epochfs", "warmup")).Run()
	}()
	select {
	case err := <-made:
		t.Fatalf("a job was created during the load (%v)", err)
	case err := <-warmed:
		t.Fatalf("a warmup was taken during the load (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(e.opts.loadHold)
	if err := <-made; err != nil {
		t.Fatalf("mkdir of a job after the load: %v", err)
	}
	if e.cat.Walking() {
		t.Error("a job was created before the load ended")
	}
	if err := <-warmed; err != nil {
		t.Fatalf("warmup after the load: %v", err)
	}
	// The write returned once the recorded copies were checked: status
	// counts them all at once.
	if st := e.p.Stats(); st.CopiesCheckedAtMount != int64(len(paths)) {
		t.Errorf("the warmup write returned before the copies were checked: %+v", st)
	}
	st := e.status()
	if st["catalog"] != "ok" || st["files_total"] != fmt.Sprint(len(paths)) || st["copies_lost"] != "0" || st["tier.t0.files"] != fmt.Sprint(len(paths)) {
		t.Errorf("status after the load: catalog=%s files_total=%s copies_lost=%s tier.t0.files=%s, want ok, %d, 0, %d",
			st["catalog"], st["files_total"], st["copies_lost"], st["tier.t0.files"], len(paths), len(paths))
	}
	if got := treeOf(e.cat); !slices.Equal(got, want) {
		t.Errorf("the catalog loaded in the background differs from the one stored")
	}
	if st["passthrough"] == "on" {
		// 50 files were opened during the load: their readers kept them.
		waitFor(t, func() bool { return e.status()["prewarm"] == "done" })
		if n := e.num("prewarm_copies"); n < int64(len(paths)-50) {
			t.Errorf("prewarm_copies=%d after the load, want at least %d (it ran over the whole tree)", n, len(paths)-50)
		}
	}
}

// A walk of names first (placement.walk = "names") on a source whose
// stats are slow: a job's mkdir returns once the names are numbered,
// while the attributes are still being read; its batches name files that
// read right through the mount meanwhile; the walk then ends with the
// tree a walk with stats builds, stored complete.
func TestAWalkOfNamesFirstStartsJobsBeforeTheAttributes(t *testing.T) {
	requireFUSE(t)
	// Two directories at the root (a mount reads the root's whole), of
	// 64 files each.
	dir, paths := makeWide(t, 2, 64)
	e, f := faultMount(t, dir, func(f *faultfs.FS, e *env) {
		// A stat's round trip to the metadata server, which a listing of
		// names does without: 64 stats a directory take 6 s or more.
		f.Delay("lookup", 100*time.Millisecond)
		f.Delay("getattr", 100*time.Millisecond)
		e.opts.serveWhileWalking = true
	})
	jobDir := filepath.Join(e.mnt, ".epochfs", "jobs", "j")
	if err := os.Mkdir(jobDir, 0o755); err != nil {
		t.Fatalf("mkdir of a job during the walk: %v", err)
	}
	st := e.status()
	if !e.cat.Walking() || st["catalog"] != "walking" || st["walk_attrs_pending"] == "0" {
		t.Fatalf("after the job's mkdir: walking %v, catalog=%s walk_attrs_pending=%s; want the attributes still read",
			e.cat.Walking(), st["catalog"], st["walk_attrs_pending"])
	}
	out, err := exec.Command("bash", "-c", fmt.Sprintf(
		"cd %s && printf 'batch_size=4\\nseed=3\\n' > config && head -n 4 next", jobDir)).Output()
	if err != nil {
		t.Fatalf("a job's batch during the walk: %v", err)
	}
	batch := strings.Fields(string(out))
	if len(batch) != 4 {
		t.Fatalf("batch %q: want 4 paths", out)
	}
	// What needs the attributes waits for them, as the shell drives it:
	// a subset (the files who may read), a resume (a state's paths) and
	// another user's job (its files are those it may read).
	state := filepath.Join(t.TempDir(), "state")
	if out, err := exec.Command("bash", "-c", fmt.Sprintf(
		"cat %[1]s/state > %[2]s && mkdir %[1]s/../k && printf 'batch_size=4\\nseed=3\\n' > %[1]s/../k/config",
		jobDir, state)).CombinedOutput(); err != nil {
		t.Fatalf("a job's state, and a second job, during the walk of attributes: %v %s", err, out)
	}
	// The wait is interrupted by a signal: the write fails and the
	// config is as it was.
	mJob := filepath.Join(e.mnt, ".epochfs", "jobs", "m")
	if err := os.Mkdir(mJob, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("timeout", "0.3", "bash", "-c", fmt.Sprintf("printf 'subset=d001\\n' > %s/config", mJob)).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 124 || !e.cat.Walking() {
		t.Errorf("a subset write interrupted during the walk of attributes: exit %d (%s), walking %v; want 124 while walking",
			code, out, e.cat.Walking())
	}
	u := newUsers(t, 1)
	openTempDirs(t, filepath.Dir(e.mnt))
	waiters := map[string]func() (string, error){
		"a subset": func() (string, error) {
			out, err := exec.Command("bash", "-c", fmt.Sprintf("printf 'subset=d000\\n' >> %s/config", jobDir)).CombinedOutput()
			return string(out), err
		},
		"a subset line ended by the close": func() (string, error) {
			out, err := exec.Command("bash", "-c", fmt.Sprintf("printf 'batch_size=2\\nsubset=d001' > %s/config", mJob)).CombinedOutput()
			return string(out), err
		},
		"a resume": func() (string, error) {
			out, err := exec.Command("bash", "-c", fmt.Sprintf("cat %s > %s/../k/resume", state, jobDir)).CombinedOutput()
			return string(out), err
		},
		"another user's job": func() (string, error) {
			return u.as(0, "mkdir "+filepath.Join(e.mnt, ".epochfs", "jobs", "u"))
		},
	}
	waited := make(chan error, len(waiters))
	for what, run := range waiters {
		go func() {
			out, err := run()
			switch {
			case err != nil:
				err = fmt.Errorf("%s during the walk of attributes: %v: %s", what, err, out)
			case e.cat.Walking():
				err = fmt.Errorf("%s was taken before the attributes were read", what)
			}
			waited <- err
		}()
	}
	time.Sleep(500 * time.Millisecond) // for them to come while the stats are slow
	// A read waits for its directory's attributes (read first, on
	// demand): the stats are made quick again for the rest.
	f.Delay("lookup", 0)
	f.Delay("getattr", 0)
	for _, p := range batch {
		rel := strings.TrimPrefix(p, e.mnt+"/")
		got, err := os.ReadFile(filepath.Join(e.mnt, rel))
		if err != nil || string(got) != rel {
			t.Errorf("read %s during the walk of attributes: %q, %v", rel, got, err)
		}
	}
	if err := e.cat.WaitWalk(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		select {
		case err := <-waited:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(time.Minute):
			t.Fatal("what waits for the attributes did not return after the walk")
		}
	}
	if cfg, err := os.ReadFile(filepath.Join(jobDir, "config")); err != nil || !strings.Contains(string(cfg), "subset=d000") {
		t.Errorf("the subset written during the walk is not the job's: %q, %v", cfg, err)
	}
	if cfg, err := os.ReadFile(filepath.Join(mJob, "config")); err != nil || !strings.Contains(string(cfg), "subset=d001") ||
		!strings.Contains(string(cfg), "batch_size=2") {
		t.Errorf("the config ended by its close during the walk: %q, %v", cfg, err)
	}
	st = e.status()
	if st["catalog"] != "ok" || st["walk_attrs_pending"] != "0" || st["files_total"] != fmt.Sprint(len(paths)) {
		t.Errorf("status after the walk: catalog=%s walk_attrs_pending=%s files_total=%s, want ok, 0, %d",
			st["catalog"], st["walk_attrs_pending"], st["files_total"], len(paths))
	}
	named := treeOf(e.cat)
	e.unmount()
	w := newEnv(t, f.Mnt(), 1<<30)
	w.mount()
	if first := treeOf(w.cat); !slices.Equal(named, first) {
		t.Errorf("the catalog of names first differs from a walk with stats:\n%v\n%v", named, first)
	}
	w.unmount()
	e2 := newEnv(t, f.Mnt(), 1<<30)
	e2.state = e.state
	e2.mount()
	if e2.cat.Walked() || e2.cat.Files() != int64(len(paths)) {
		t.Errorf("remount: walked again %v, %d files (want %d)", e2.cat.Walked(), e2.cat.Files(), len(paths))
	}
}

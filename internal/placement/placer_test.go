package placement

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/tier"
)

func oneTier(quota int64) []tier.Options {
	return []tier.Options{{Name: "mem", Quota: quota}}
}

func TestEveryFileReadsByteIdenticalBeforeDuringAndAfterPlacement(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	// Cold: every open starts or joins a copy; reads follow it.
	e.readAllFiles()
	e.waitResident()
	e.checkAccounting()
	if st := e.p.Stats(); st.Done != int64(len(d)) || st.Failed != 0 || st.SkippedNoSpace != 0 || st.BytesPlaced != d.Bytes() {
		t.Errorf("stats after placing everything: %+v (want Done=%d BytesPlaced=%d)", st, len(d), d.Bytes())
	}
	// Installed copies hold the source bytes.
	for _, p := range d.Paths() {
		b, err := os.ReadFile(e.tiers[0].Path(p))
		if err != nil || !bytes.Equal(b, d[p]) {
			t.Errorf("tier copy of %s differs from the source (%v)", p, err)
		}
	}
	if tmp := tempFiles(t, e.tiers[0].Dir()); len(tmp) != 0 {
		t.Errorf("temp files left after placement: %v", tmp)
	}
	// Warm: every read is served by the tiers.
	before := e.source.Stats()
	e.readAllFiles()
	for _, p := range d.Paths() {
		r, err := e.p.Open(context.Background(), e.entry(p))
		if err != nil {
			t.Fatal(err)
		}
		if r.TierIndex() != 0 || r.ResidentFD() < 0 {
			t.Errorf("%s: resident file opened on tier %d", p, r.TierIndex())
		}
		r.Close()
	}
	if after := e.source.Stats(); after != before {
		t.Errorf("source counters changed on a pass over resident files: %+v → %+v", before, after)
	}
}

func TestReadsWithValidateOpenStatButNeverReadTheSourceOnceResident(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{Validate: ValidateOpen})
	e.readAllFiles()
	e.waitResident()
	before := e.source.Stats()
	e.readAllFiles()
	after := e.source.Stats()
	if after.Opens != before.Opens || after.Reads != before.Reads || after.Bytes != before.Bytes {
		t.Errorf("source data counters changed on a resident pass: %+v → %+v", before, after)
	}
	if after.Stats <= before.Stats {
		t.Errorf("ValidateOpen did not stat the source: %+v → %+v", before, after)
	}
}

func TestConcurrentReadersShareOneCopy(t *testing.T) {
	for _, size := range []int{0, 3<<20 + 1234} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			d := dataset{"dir/shared.bin": content("shared", size)}
			e := newEnv(t, d, oneTier(1<<30), Options{})
			en := e.entry("dir/shared.bin")
			const readers = 16
			ctx := context.Background()
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := 0; i < readers; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r, err := e.p.Open(ctx, en)
					if err != nil {
						t.Error(err)
						return
					}
					defer r.Close()
					if err := readCheck(ctx, r, d["dir/shared.bin"], patterns[i%len(patterns)]); err != nil {
						t.Errorf("reader %d: %v", i, err)
					}
					if err := readCheck(ctx, r, d["dir/shared.bin"], readPattern{buf: 1 << 20}); err != nil {
						t.Errorf("reader %d: %v", i, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			e.waitResident()
			waitFor(t, "the copy to end", func() bool { return e.p.Stats().Queued == 0 })
			st := e.source.Stats()
			if st.Opens != 1 || st.Bytes != int64(size) {
				t.Errorf("%d readers: %d source opens and %d source bytes, want 1 open and %d bytes", readers, st.Opens, st.Bytes, size)
			}
			if ps := e.p.Stats(); ps.Done != 1 || ps.BytesPlaced != int64(size) {
				t.Errorf("placer stats %+v, want one copy", ps)
			}
			if e.tiers[0].Used() != int64(size) || e.tiers[0].Files() != 1 {
				t.Errorf("tier accounts %d bytes in %d files, want %d in 1", e.tiers[0].Used(), e.tiers[0].Files(), size)
			}
		})
	}
}

// A reader whose residency check ran just before another copy of the
// same file ended must not start a second copy: the file would cross the
// source twice and its bytes would be accounted twice in the tier.
func TestResidentFileIsNeverCopiedAgain(t *testing.T) {
	d := dataset{"f": content("f", 200_000)}
	e := newEnv(t, d, oneTier(1<<30), Options{})
	en := e.entry("f")
	r, err := e.p.Open(context.Background(), en)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	e.waitResident()
	waitFor(t, "the copy's flight to end", func() bool { return e.p.cp.flights.Size() == 0 })
	opens := e.source.Stats().Opens
	// The interleaving: wants()/Open saw the file non-resident, then the
	// copy installed it and left the flight map, then this runs.
	f, started := e.p.cp.startFlight(en)
	if f != nil {
		if started {
			e.p.cp.run(f)
		}
		f.release()
	}
	if got := e.source.Stats().Opens; got != opens {
		t.Errorf("the source was opened %d more times for a resident file", got-opens)
	}
	e.checkAccounting()
	if st := e.p.Stats(); st.Done != 1 || st.Failed != 0 {
		t.Errorf("stats %+v, want Done=1 Failed=0", st)
	}
	e.readAllFiles()
}

func TestMissingTierCopyIsDroppedAndPlacedAgain(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	lost := "val/mib+1"
	if err := os.Remove(e.tiers[0].Path(lost)); err != nil {
		t.Fatal(err)
	}
	// A truncated copy is not served either.
	short := "train/b/img-2.jpg"
	if err := os.Truncate(e.tiers[0].Path(short), 10); err != nil {
		t.Fatal(err)
	}
	e.readAllFiles()
	e.waitResident()
	waitFor(t, "copies to end", func() bool { return e.p.Stats().Queued == 0 })
	e.checkAccounting()
	for _, p := range []string{lost, short} {
		b, err := os.ReadFile(e.tiers[0].Path(p))
		if err != nil || !bytes.Equal(b, d[p]) {
			t.Errorf("%s not placed again (%v)", p, err)
		}
	}
}

func TestQuotaSkipsFilesThatDoNotFitAndPlacesSmallerOnes(t *testing.T) {
	d := dataset{}
	// Path order puts the misfits first: Monarch would stop there.
	d["0-huge"] = content("0-huge", 2<<20+17)
	d["1-large"] = content("1-large", 1<<20+5)
	for i := 0; i < 20; i++ {
		p := fmt.Sprintf("2-small/%02d", i)
		d[p] = content(p, 40_000+i*997)
	}
	quota := d.Bytes() * 40 / 100
	e := newEnv(t, d, oneTier(quota), Options{})
	e.p.warmups.queueAll()
	waitFor(t, "warmup to settle", func() bool {
		w := e.p.warmups.progressAll()
		return w.Done+w.Skipped == w.Files && e.p.Stats().Queued == 0
	})
	e.checkAccounting()
	tr := e.tiers[0]
	if tr.Used() > quota {
		t.Fatalf("tier uses %d bytes, quota %d", tr.Used(), quota)
	}
	if !e.entry("0-huge").Residency().NoSpace() || e.entry("0-huge").Tier() >= 0 {
		t.Error("a file larger than the quota was not skipped")
	}
	var skipped int64
	for _, p := range d.Paths() {
		en := e.entry(p)
		if en.Tier() >= 0 {
			continue
		}
		skipped++
		if int64(len(d[p])) <= quota-tr.Used() {
			t.Errorf("%s (%d bytes) skipped although %d bytes of the quota are free", p, len(d[p]), quota-tr.Used())
		}
	}
	st := e.p.Stats()
	if st.SkippedNoSpace != skipped || skipped == 0 {
		t.Errorf("SkippedNoSpace = %d, %d files not resident", st.SkippedNoSpace, skipped)
	}
	if n, _ := e.p.residency(); n == 0 || st.Done != n {
		t.Errorf("%d files resident, Done %d: smaller files were not placed after a misfit", n, st.Done)
	}
	w := e.p.warmups.progressAll()
	if w.Skipped != skipped || w.Pct >= 100 || w.Pct <= 0 {
		t.Errorf("warmup progress %+v with %d skipped", w, skipped)
	}
	// Everything still reads correctly; skipped files from the source.
	e.readAllFiles()
	r, err := e.p.Open(context.Background(), e.entry("0-huge"))
	if err != nil {
		t.Fatal(err)
	}
	if r.TierIndex() != -1 || r.fl != nil {
		t.Error("a skipped file started a copy on open")
	}
	r.Close()
	if got := e.p.Stats().SkippedNoSpace; got != skipped {
		t.Errorf("re-reading skipped files changed SkippedNoSpace %d → %d", skipped, got)
	}
	e.checkAccounting()
}

func TestSecondTierTakesFilesOnceTheFirstIsFull(t *testing.T) {
	d := dataset{}
	for i := 0; i < 24; i++ {
		p := fmt.Sprintf("d%d/f%02d", i%3, i)
		d[p] = content(p, 50_000+i*3001)
	}
	q0 := d.Bytes() / 4
	e := newEnv(t, d, []tier.Options{{Name: "mem", Quota: q0}, {Name: "nvme", Quota: 1 << 30}}, Options{})
	e.p.warmups.queueAll()
	waitFor(t, "warmup", func() bool { return e.p.warmups.progressAll().Done == int64(len(d)) })
	e.checkAccounting()
	t0, t1 := e.tiers[0], e.tiers[1]
	if t0.Files() == 0 || t1.Files() == 0 || t0.Files()+t1.Files() != int64(len(d)) {
		t.Fatalf("files per tier: %d, %d", t0.Files(), t1.Files())
	}
	if t0.Used() > q0 {
		t.Errorf("first tier uses %d over its quota %d", t0.Used(), q0)
	}
	for _, p := range d.Paths() {
		if en := e.entry(p); en.Tier() == 1 && int64(len(d[p])) <= q0-t0.Used() {
			t.Errorf("%s went to the second tier although the first has %d bytes free", p, q0-t0.Used())
		}
	}
	if st := e.p.Stats(); st.SkippedNoSpace != 0 {
		t.Errorf("SkippedNoSpace = %d with room in the second tier", st.SkippedNoSpace)
	}
	before := e.source.Stats()
	e.readAllFiles()
	// The first opens of this mount stat the source (ValidateOnce); they
	// read nothing from it.
	if after := e.source.Stats(); after.Opens != before.Opens || after.Reads != before.Reads || after.Bytes != before.Bytes {
		t.Errorf("source read for resident files: %+v → %+v", before, after)
	}
}

func TestBrokenTierFallsBackToTheSource(t *testing.T) {
	d := sizedDataset()
	t.Run("statfs error", func(t *testing.T) {
		bad := func(string) (uint64, uint64, error) { return 0, 0, errors.New("statfs: input/output error") }
		e := newEnv(t, d, []tier.Options{{Name: "mem", Quota: 1 << 30, Statfs: bad}}, Options{})
		e.readAllFiles()
		if n, _ := e.p.residency(); n != 0 {
			t.Errorf("%d files resident on a tier that cannot statfs", n)
		}
		if e.tiers[0].Used() != 0 || e.tiers[0].Reserved() != 0 {
			t.Errorf("broken tier used %d reserved %d", e.tiers[0].Used(), e.tiers[0].Reserved())
		}
		if e.source.Stats().Bytes < d.Bytes() {
			t.Errorf("source gave %d bytes for a pass over %d", e.source.Stats().Bytes, d.Bytes())
		}
		if e.p.Stats().SkippedNoSpace != 0 {
			t.Error("an unhealthy tier marked files as not fitting")
		}
	})
	t.Run("statfs error on the first of two tiers", func(t *testing.T) {
		bad := func(string) (uint64, uint64, error) { return 0, 0, errors.New("statfs: input/output error") }
		e := newEnv(t, d, []tier.Options{{Name: "mem", Quota: 1 << 30, Statfs: bad}, {Name: "nvme", Quota: 1 << 30}}, Options{})
		e.readAllFiles()
		e.waitResident()
		if e.tiers[1].Files() != int64(len(d)) {
			t.Errorf("second tier holds %d files, want %d", e.tiers[1].Files(), len(d))
		}
		e.checkAccounting()
	})
	t.Run("unwritable directory", func(t *testing.T) {
		e := newEnv(t, d, oneTier(1<<30), Options{})
		dir := e.tiers[0].Dir()
		// Root ignores permission bits: make the temp directory a file too.
		os.Chmod(dir, 0o500)
		os.Chmod(filepath.Join(dir, "data"), 0o500)
		if err := os.RemoveAll(filepath.Join(dir, ".tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".tmp"), nil, 0o400); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700); os.Chmod(filepath.Join(dir, "data"), 0o700) })
		e.readAllFiles()
		if n, _ := e.p.residency(); n != 0 {
			t.Errorf("%d files resident on an unwritable tier", n)
		}
		if e.tiers[0].Reserved() != 0 || e.tiers[0].Used() != 0 {
			t.Errorf("failed copies left reserved=%d used=%d", e.tiers[0].Reserved(), e.tiers[0].Used())
		}
		if e.tiers[0].Errors() == 0 {
			t.Error("tier errors not noted")
		}
	})
}

func TestCopyGoesToTheNextTierWhenTheFirstCannotCreateItsTempFile(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, []tier.Options{{Name: "mem", Quota: 1 << 30}, {Name: "nvme", Quota: 1 << 30}}, Options{})
	dir := e.tiers[0].Dir()
	// The first tier's temp directory is a file: every create there fails,
	// while its quota and statfs still say there is room.
	if err := os.RemoveAll(filepath.Join(dir, ".tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".tmp"), nil, 0o400); err != nil {
		t.Fatal(err)
	}
	e.readAllFiles() // one pass: no file is read twice
	e.waitResident()
	if got := e.tiers[1].Files(); got != int64(len(d)) {
		t.Errorf("second tier holds %d files, want %d", got, len(d))
	}
	if st := e.p.Stats(); st.Failed != 0 {
		t.Errorf("%d copies failed although the second tier had room", st.Failed)
	}
	if e.tiers[0].Errors() == 0 || e.tiers[0].Reserved() != 0 || e.tiers[0].Used() != 0 {
		t.Errorf("first tier: errors %d, reserved %d, used %d", e.tiers[0].Errors(), e.tiers[0].Reserved(), e.tiers[0].Used())
	}
	e.checkAccounting()
}

func TestValidateOpenDropsTheCopyOfAChangedFile(t *testing.T) {
	d := dataset{
		"grows":      content("grows", 100_000),
		"same-size":  content("same-size", 70_000),
		"untouched":  content("untouched", 50_000),
		"other/file": content("other/file", 3_000),
	}
	e := newEnv(t, d, oneTier(1<<30), Options{Validate: ValidateOpen})
	e.p.warmups.queueAll()
	e.waitResident()
	ctx := context.Background()

	// New size, and new bytes with the same size but a new mtime.
	newGrows := content("grows v2", 160_000)
	if err := os.WriteFile(filepath.Join(e.src, "grows"), newGrows, 0o644); err != nil {
		t.Fatal(err)
	}
	newSame := content("same-size v2", 70_000)
	sp := filepath.Join(e.src, "same-size")
	st, _ := os.Stat(sp)
	if err := os.WriteFile(sp, newSame, 0o644); err != nil {
		t.Fatal(err)
	}
	later := st.ModTime().Add(2 * time.Second)
	if err := os.Chtimes(sp, later, later); err != nil {
		t.Fatal(err)
	}

	for p, want := range map[string][]byte{"grows": newGrows, "same-size": newSame} {
		en := e.entry(p)
		r, err := e.p.Open(ctx, en)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Changed() {
			t.Errorf("%s: Open did not report the change", p)
		}
		if r.ResidentFD() >= 0 || r.TierIndex() >= 0 {
			t.Errorf("%s: opened on the stale tier copy", p)
		}
		if en.Attr().Size != int64(len(want)) {
			t.Errorf("%s: catalog size %d, want %d", p, en.Attr().Size, len(want))
		}
		for _, pt := range patterns {
			if err := readCheck(ctx, r, want, pt); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
		r.Close()
	}
	r, err := e.p.Open(ctx, e.entry("untouched"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Changed() || r.TierIndex() != 0 {
		t.Errorf("untouched file: changed=%v tier=%d", r.Changed(), r.TierIndex())
	}
	r.Close()

	// The changed files are placed again with their new content.
	e.data["grows"], e.data["same-size"] = newGrows, newSame
	e.waitResident()
	e.checkAccounting()
	for _, p := range []string{"grows", "same-size"} {
		b, err := os.ReadFile(e.tiers[0].Path(p))
		if err != nil || !bytes.Equal(b, e.data[p]) {
			t.Errorf("tier copy of %s is not the new content (%v)", p, err)
		}
	}
	e.readAllFiles()
	// Persisted: a remount serves the new attributes and copies.
	e.close()
	e.open(false)
	if a := e.entry("grows").Attr(); a.Size != int64(len(newGrows)) || e.entry("grows").Tier() != 0 {
		t.Errorf("after remount grows: %+v tier %d", a, e.entry("grows").Tier())
	}
	e.readAllFiles()
}

// Many opens of a file whose source changed race to drop its copy; the
// copy's bytes leave the tier's accounting once.
func TestConcurrentOpensOfAChangedFileDropItsCopyOnce(t *testing.T) {
	d := dataset{"a": content("a", 300_000), "b": content("b", 200_000)}
	e := newEnv(t, d, oneTier(1<<30), Options{Validate: ValidateOpen})
	ctx := context.Background()
	for round := 0; round < 25; round++ {
		e.p.warmups.queueAll()
		e.waitResident()
		e.checkAccounting()
		nb := content(fmt.Sprint("a", round), 300_000+round+1)
		if err := os.WriteFile(filepath.Join(e.src, "a"), nb, 0o644); err != nil {
			t.Fatal(err)
		}
		e.data["a"] = nb
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := e.p.Open(ctx, e.entry("a"))
				if err != nil {
					t.Error(err)
					return
				}
				defer r.Close()
				if err := readCheck(ctx, r, nb, readPattern{buf: 100_000}); err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	e.waitResident()
	e.checkAccounting()
}

func TestVanishedSourceFile(t *testing.T) {
	d := sizedDataset()
	ctx := context.Background()
	t.Run("validate on open", func(t *testing.T) {
		e := newEnv(t, d, oneTier(1<<30), Options{Validate: ValidateOpen})
		for _, p := range []string{"z/small-01", "val/mib"} {
			if err := os.Remove(filepath.Join(e.src, p)); err != nil {
				t.Fatal(err)
			}
			_, err := e.p.Open(ctx, e.entry(p))
			if !errors.Is(err, ErrVanished) {
				t.Errorf("open of vanished %s: %v, want ErrVanished", p, err)
			}
			delete(e.data, p)
		}
		e.readAllFiles()
	})
	t.Run("without validation", func(t *testing.T) {
		e := newEnv(t, d, oneTier(1<<30), Options{Validate: ValidateNever})
		p := "train/b/img-2.jpg"
		en := e.entry(p)
		if err := os.Remove(filepath.Join(e.src, p)); err != nil {
			t.Fatal(err)
		}
		r, err := e.p.Open(ctx, en)
		if err == nil {
			_, err = r.ReadAt(ctx, make([]byte, 10), 0)
			r.Close()
		}
		if !errors.Is(err, ErrVanished) {
			t.Errorf("read of vanished %s: %v, want ErrVanished", p, err)
		}
		delete(e.data, p)
		e.readAllFiles()
		if en.Tier() >= 0 {
			t.Error("a vanished file became resident")
		}
		if e.p.Catalog().Find(p) != nil || !en.Gone() {
			t.Error("a vanished file is still in the dataset")
		}
	})
	t.Run("resident then vanished", func(t *testing.T) {
		e := newEnv(t, d, oneTier(1<<30), Options{Validate: ValidateOpen})
		e.p.warmups.queueAll()
		e.waitResident()
		p := "big/two.tar"
		if err := os.Remove(filepath.Join(e.src, p)); err != nil {
			t.Fatal(err)
		}
		if _, err := e.p.Open(ctx, e.entry(p)); !errors.Is(err, ErrVanished) {
			t.Errorf("open of vanished resident %s: %v, want ErrVanished", p, err)
		}
		delete(e.data, p)
		e.readAllFiles()
	})
}

func TestOpenOfADirectoryIsNotAFile(t *testing.T) {
	e := newEnv(t, sizedDataset(), oneTier(1<<30), Options{})
	if _, err := e.p.Open(context.Background(), e.entry("train")); !errors.Is(err, ErrNotFile) {
		t.Errorf("open of a directory: %v", err)
	}
}

// Close cancels the copies in progress and returns only once they are
// gone. Copies started by reads run outside the worker pool; a Close that
// did not wait for them returned with temp files, reservations and flights
// still live, so the scenario runs a few times to catch that.
func TestCloseCancelsCopiesInProgress(t *testing.T) {
	for round := 0; round < 5; round++ {
		closeWithCopiesInProgress(t)
		if t.Failed() {
			return
		}
	}
}

func closeWithCopiesInProgress(t *testing.T) {
	d := dataset{}
	for i := 0; i < 16; i++ {
		p := fmt.Sprintf("slow/%02d", i)
		d[p] = content(p, 2<<20+1+i)
	}
	e := newEnv(t, d, oneTier(1<<30), Options{})
	// A slow source: 64 KiB/s shared by sixteen copies of a bit over 2
	// MiB. The cap is paid after each read: the 1 MiB burst and one more
	// read go at once, then the debt takes 16 s, and no copy can finish
	// before all have started.
	e.source = openSource(t, source.Options{Root: e.src, Bandwidth: 64 << 10})
	e.p.src, e.p.val.src, e.p.cp.src = e.source, e.source, e.source
	ctx := context.Background()
	var readers []*Reader
	for _, p := range d.Paths() {
		r, err := e.p.Open(ctx, e.entry(p))
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	dir := e.tiers[0].Dir()
	waitFor(t, "every copy in progress", func() bool { return len(tempFiles(t, dir)) == len(d) })
	e.p.Close()
	// Close waited for the cancelled copies: no temp file, reservation or
	// copy is left, and nothing was installed.
	if tmp := tempFiles(t, dir); len(tmp) != 0 {
		t.Errorf("%d temp files left after Close", len(tmp))
	}
	if r := e.tiers[0].Reserved(); r != 0 {
		t.Errorf("%d bytes still reserved after Close", r)
	}
	st := e.p.Stats()
	if st.Queued != 0 || st.Done != 0 || st.Failed != 0 {
		t.Errorf("stats after Close: %+v (cancelled copies are neither done nor failed)", st)
	}
	if n := e.p.cp.flights.Size(); n != 0 {
		t.Errorf("%d flights left after Close", n)
	}
	if _, err := e.p.Open(ctx, e.entry("slow/00")); !errors.Is(err, ErrClosed) {
		t.Errorf("Open after Close: %v, want ErrClosed", err)
	}
	e.p.Close() // a second Close returns
	for _, r := range readers {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}
	e.p = nil
	tr, err := tier.Open(e.topts[0])
	if err != nil {
		t.Fatal(err)
	}
	if tmp := tempFiles(t, tr.Dir()); len(tmp) != 0 {
		t.Errorf("temp files after reopening the tier: %v", tmp)
	}
	for _, p := range d.Paths() {
		if _, err := os.Stat(tr.Path(p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cancelled copy of %s installed (%v)", p, err)
		}
	}
}

func TestRemountReusesResidentCopies(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, []tier.Options{{Name: "mem", Quota: d.Bytes() / 3}, {Name: "nvme", Quota: 1 << 30}}, Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	files, bytes := e.p.residency()
	var tierOf []int
	for _, p := range d.Paths() {
		tierOf = append(tierOf, e.entry(p).Tier())
	}
	used0, used1 := e.tiers[0].Used(), e.tiers[1].Used()
	e.close()
	e.open(false)
	if e.cat.Walked() {
		t.Error("remount walked the source")
	}
	if f, b := e.p.residency(); f != files || b != bytes {
		t.Errorf("residency after remount %d files %d bytes, before %d %d", f, b, files, bytes)
	}
	for i, p := range d.Paths() {
		if got := e.entry(p).Tier(); got != tierOf[i] {
			t.Errorf("%s: tier %d after remount, %d before", p, got, tierOf[i])
		}
	}
	if e.tiers[0].Used() != used0 || e.tiers[1].Used() != used1 {
		t.Errorf("tiers account %d, %d after remount; %d, %d before", e.tiers[0].Used(), e.tiers[1].Used(), used0, used1)
	}
	e.checkAccounting()
	e.readAllFiles()
	e.p.warmups.queueAll()
	waitFor(t, "warmup of a resident dataset", func() bool { return e.p.warmups.progressAll().Pct == 100 })
	if st := e.p.Stats(); st.Done != 0 || st.BytesPlaced != 0 {
		t.Errorf("remount copied again: %+v", st)
	}
	if st := e.source.Stats(); st.Opens != 0 || st.Bytes != 0 {
		t.Errorf("remount read the source: %+v", st)
	}
}

func TestRescanDropsStaleCopiesAndKeepsTheRest(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	e.close()
	changed, gone := "train/b/img-110k.jpg", "z/small-02"
	nb := content("new", 111_111)
	if err := os.WriteFile(filepath.Join(e.src, changed), nb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.src, gone)); err != nil {
		t.Fatal(err)
	}
	e.data[changed] = nb
	delete(e.data, gone)
	e.open(true)
	stale := e.cat.Stale()
	sort.Slice(stale, func(i, j int) bool { return stale[i].Path < stale[j].Path })
	if len(stale) != 2 || stale[0].Path != changed || stale[1].Path != gone {
		t.Fatalf("Stale() = %+v", stale)
	}
	for _, p := range []string{changed, gone} {
		if _, err := os.Stat(e.tiers[0].Path(p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale copy of %s not removed (%v)", p, err)
		}
	}
	e.checkAccounting()
	// d lost the deleted file; the changed one is not resident.
	if n, _ := e.p.residency(); n != int64(len(d))-1 {
		t.Errorf("%d resident after rescan, want %d", n, len(d)-1)
	}
	e.readAllFiles()
	e.waitResident()
	e.checkAccounting()
}

func TestReaderEOFAndZeroLengthReads(t *testing.T) {
	d := dataset{"f": content("f", 5000), "e": nil}
	e := newEnv(t, d, oneTier(1<<30), Options{})
	ctx := context.Background()
	for pass := 0; pass < 2; pass++ {
		for _, p := range []string{"f", "e"} {
			r, err := e.p.Open(ctx, e.entry(p))
			if err != nil {
				t.Fatal(err)
			}
			for _, off := range []int64{0, 1, 4999, 5000, 1 << 40} {
				n, err := r.ReadAt(ctx, nil, off)
				if n != 0 || err != nil {
					t.Errorf("pass %d %s: zero-length read at %d: %d, %v", pass, p, off, n, err)
				}
			}
			buf := make([]byte, 10)
			n, err := r.ReadAt(ctx, buf, int64(len(d[p])))
			if n != 0 || (err != nil && err != io.EOF) {
				t.Errorf("pass %d %s: read at EOF: %d, %v", pass, p, n, err)
			}
			r.Close()
		}
		e.waitResident()
	}
}

// A hook has one subscriber: a second one while the first is installed is
// a wiring mistake and panics rather than replacing it; after nil, a new
// one may be installed.
func TestHooksRefuseASecondSubscriber(t *testing.T) {
	e := newEnv(t, smallDataset(1, 10), nil, Options{})
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", what)
			}
		}()
		f()
	}
	e.p.SetNotify(func(Event) {})
	mustPanic("a second SetNotify", func() { e.p.SetNotify(func(Event) {}) })
	e.p.SetNotify(nil)
	e.p.SetNotify(func(Event) {})
	e.p.SetNotify(nil)
	h := &DemandHook{Wanted: func(*catalog.Entry) bool { return false }, Keep: func(*catalog.Entry) bool { return false }}
	e.p.Buffer().SetDemandHook(h)
	mustPanic("a second SetDemandHook", func() { e.p.Buffer().SetDemandHook(h) })
	e.p.Buffer().SetDemandHook(nil)
	e.p.Buffer().SetDemandHook(h)
	e.p.Buffer().SetDemandHook(nil)
}

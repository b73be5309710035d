// Package faults measures how the mount behaves when its source fails:
// resident reads during an outage against the same reads with the source
// up (interleaved, repeated), and the time a read that needs a hung source
// takes to fail. The source is a real sshfs over an sshd in its own network
// namespace (test/faultfs); epochfs is the real binary with its default
// config (placement.source_timeout = 30s) unless a case says otherwise.
//
//	make bench-faults     (go test -run '^$' -bench . -benchtime 1x ./test/bench/faults)
//
// Environment: FAULT_REPS (5), FAULT_FILES (300 resident files of 110 KB),
// FAULT_HANG_READS (3 reads during a hang, 30 s each by default).
package faults

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/test/faultfs"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func binary(b *testing.B) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "epochfs-bench-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "epochfs")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/epochfs/epochfs/cmd/epochfs").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return binPath
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

type mount struct {
	b     *testing.B
	bin   string
	mnt   string
	state string
}

func (m *mount) cli(args ...string) string {
	out, err := exec.Command(m.bin, args...).CombinedOutput()
	if err != nil {
		m.b.Fatalf("epochfs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (m *mount) status() map[string]string {
	data, err := os.ReadFile(filepath.Join(m.mnt, ".epochfs", "status"))
	if err != nil {
		m.b.Fatal(err)
	}
	kv := status.Parse(data).Map()
	return kv
}

func (m *mount) num(k string) int64 {
	n, _ := strconv.ParseInt(m.status()[k], 10, 64)
	return n
}

// pass reads every file once in a random order and returns each file's
// open+read+close time; a read that differs from the source is fatal.
func pass(b *testing.B, mnt, src string, files []string, rng *mrand.Rand) []time.Duration {
	order := append([]string(nil), files...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	out := make([]time.Duration, 0, len(order))
	for _, f := range order {
		want, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		got, err := os.ReadFile(filepath.Join(mnt, f))
		out = append(out, time.Since(start))
		if err != nil || !bytes.Equal(got, want) {
			b.Fatalf("%s: %d bytes, %v (want the %d bytes of the source)", f, len(got), err, len(want))
		}
	}
	return out
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func spread(xs []float64) string {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median(s), s[0], s[len(s)-1])
}

// BenchmarkSourceFaults runs every case once per invocation (-benchtime 1x).
func BenchmarkSourceFaults(b *testing.B) {
	reps := envInt("FAULT_REPS", 5)
	nfiles := envInt("FAULT_FILES", 300)
	hangReads := envInt("FAULT_HANG_READS", 3)
	bin := binary(b)

	src := b.TempDir()
	var files, big []string
	for i := 0; i < nfiles; i++ {
		p := fmt.Sprintf("c%02d/img%04d.jpg", i%10, i)
		files = append(files, p)
	}
	for i := 0; i < hangReads; i++ {
		big = append(big, fmt.Sprintf("big/%d.bin", i))
	}
	for _, p := range append(append([]string(nil), files...), big...) {
		size := 110 << 10
		if strings.HasPrefix(p, "big/") {
			size = 64 << 20 // never fits the tier below
		}
		os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755)
		data := make([]byte, size)
		rand.Read(data)
		if err := os.WriteFile(filepath.Join(src, p), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	fsrc := faultfs.StartSSHFS(b, src)
	rng := mrand.New(mrand.NewPCG(1, 2))
	for _, validate := range []string{"once", "open"} {
		base := b.TempDir()
		m := &mount{b: b, bin: bin, mnt: filepath.Join(base, "mnt"), state: filepath.Join(base, "state")}
		os.Mkdir(m.mnt, 0o755)
		cfg := filepath.Join(base, "c.toml")
		os.WriteFile(cfg, []byte(fmt.Sprintf("[placement]\nvalidate = %q\n", validate)), 0o644)
		m.cli("mount", "--config", cfg, "--state", m.state,
			"--tier", "disk="+filepath.Join(base, "tier")+":"+strconv.Itoa(nfiles*(110<<10)+(8<<20)), fsrc.Mnt(), m.mnt)
		unmount := func() { exec.Command(bin, "unmount", "--lazy", m.mnt).Run() }
		pass(b, m.mnt, src, files, rng) // epoch 1: places everything
		for m.num("placements_queued") > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		if r := m.num("files_resident"); r != int64(nfiles) {
			unmount()
			b.Fatalf("%d of %d files resident", r, nfiles)
		}
		// After a fault the mount leaves the source alone for its error
		// back-off (2 s) and until stuck calls return: wait that out, so
		// that each pass starts from a source the mount trusts again.
		settle := func() {
			time.Sleep(2500 * time.Millisecond)
			for m.num("source_stuck") > 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
		statsBefore := m.num("source_stats")
		var normal, down, hung, maxNormal, maxDown, maxHung []float64
		for rep := 0; rep < reps; rep++ {
			n := pass(b, m.mnt, src, files, rng)
			fsrc.Down()
			d := pass(b, m.mnt, src, files, rng)
			fsrc.Up()
			settle()
			fsrc.Hang()
			h := pass(b, m.mnt, src, files, rng)
			fsrc.Resume()
			settle()
			normal = append(normal, sum(n).Seconds())
			down = append(down, sum(d).Seconds()/sum(n).Seconds())
			hung = append(hung, sum(h).Seconds()/sum(n).Seconds())
			maxNormal = append(maxNormal, maxOf(n).Seconds()*1e3)
			maxDown = append(maxDown, maxOf(d).Seconds()*1e3)
			maxHung = append(maxHung, maxOf(h).Seconds()*1e3)
		}
		st := m.status()
		fmt.Printf("validate=%s: %d resident files, %d repetitions (normal, down, hung passes interleaved)\n", validate, nfiles, reps)
		fmt.Printf("  normal pass:                %s s\n", spread(normal))
		fmt.Printf("  pass with sshd killed:      %s × normal\n", spread(down))
		fmt.Printf("  pass with sshd stopped:     %s × normal\n", spread(hung))
		fmt.Printf("  slowest file, normal:       %s ms\n", spread(maxNormal))
		fmt.Printf("  slowest file, sshd killed:  %s ms\n", spread(maxDown))
		fmt.Printf("  slowest file, sshd stopped: %s ms\n", spread(maxHung))
		fmt.Printf("  source stats in the passes after epoch 1: %d; served_stale_on_error=%s source_errors=%s\n",
			m.num("source_stats")-statsBefore, st["served_stale_on_error"], st["source_errors"])
		b.ReportMetric(median(down), "down/normal-"+validate)
		b.ReportMetric(median(hung), "hung/normal-"+validate)
		if validate == "once" {
			b.ReportMetric(float64(m.num("source_stats")-statsBefore), "stats-after-epoch1")
			// A read that needs the hung source: EIO at the timeout.
			fsrc.Hang()
			var eio []float64
			for _, p := range big {
				start := time.Now()
				_, err := os.ReadFile(filepath.Join(m.mnt, p))
				took := time.Since(start).Seconds()
				if !errors.Is(err, syscall.EIO) {
					fsrc.Resume()
					unmount()
					b.Fatalf("non-resident read during a hang: %v after %.1fs, want EIO", err, took)
				}
				eio = append(eio, took)
			}
			fsrc.Resume()
			fmt.Printf("  non-resident read during a hang: EIO after %s s (source_timeout 30s, %d reads)\n", spread(eio), len(eio))
			b.ReportMetric(median(eio), "s-to-EIO")
		}
		for m.num("source_stuck") > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		if out, err := exec.Command(bin, "unmount", m.mnt).CombinedOutput(); err != nil {
			unmount()
			b.Fatalf("unmount: %v %s", err, out)
		}
	}
}

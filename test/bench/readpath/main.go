// Command readpath measures read throughput of a directory tree: N
// goroutines take files from a list, and open, read whole and close each
// one. test/bench/readpath.sh runs it against a tier directory (native) and
// the epochfs mount of the same data, and turns the results into the
// "Read path overhead" table of docs/benchmarks.md.
//
//	readpath gen -out DIR -lists DIR [-small 20000] [-small-size 110000] [-large-size 2GiB]
//	readpath read -dir DIR -files LIST [-concurrency 8] [-bufsize 1MiB] [-cpu-pid PID] [-tag k=v]...
//	readpath report [-reps-note TEXT] RESULTS.jsonl
//	readpath epochs [-epochs 3] [-concurrency 8] [-seed N] [-drop-caches] [-snapshot CMD] DIR
//
// read prints one JSON object per run: files, bytes, seconds, MB/s (10^6
// bytes per second), files/s and the open(2) latency (p50, p99) seen by the
// readers, and with -cpu-pid the user+system CPU time that process (the
// epochfs daemon) spent during the run, also per 1,000 opens. The tags are
// copied into it. report reads those lines, pairs each
// mount run with the native run of the same repetition and prints a
// markdown table of medians and min–max spreads.
//
// epochs is the "raw" reader of the epoch benchmarks (test/bench/run.sh):
// every regular file under DIR, read whole by N readers in a new random
// order each epoch, the page cache dropped before each epoch with
// -drop-caches (outside the timing); it prints the JSON of
// test/bench/epochs/train.py (epochs, and the -snapshot command's key=value
// output before epoch 1 and after each epoch).
//
// Exit codes: 0 success, 1 runtime error, 2 usage error.
//
// Long file: one benchmark program: its setups, runs and report read together.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

type usageError struct{ error }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: readpath gen|read|report|epochs [flags]")
		return exitUsage
	}
	var err error
	switch args[0] {
	case "gen":
		err = runGen(args[1:], stdout, stderr)
	case "read":
		err = runRead(args[1:], stdout, stderr)
	case "report":
		err = runReport(args[1:], stdout, stderr)
	case "epochs":
		err = runEpochs(args[1:], stdout, stderr)
	default:
		err = usageError{fmt.Errorf("unknown command %q (want gen, read, report or epochs)", args[0])}
	}
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitUsage
	}
	fmt.Fprintln(stderr, "readpath:", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitRuntime
}

// byteSize is a flag value: a byte count with an optional KiB/MiB/GiB or
// k/M/G suffix.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	units := []struct {
		suf string
		mul int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}}
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suf) {
			s, mul = strings.TrimSuffix(s, u.suf), u.mul
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("bad size %q", s)
	}
	*b = byteSize(v * mul)
	return nil
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	f := flag.NewFlagSet("readpath "+name, flag.ContinueOnError)
	f.SetOutput(stderr)
	return f
}

func parse(f *flag.FlagSet, args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	return nil
}

// ---- gen ----

// runGen writes the benchmark dataset: many small files in class
// directories and one large file, all random bytes, plus the file lists
// (small.list in a fixed random order, as a shuffled epoch reads them).
func runGen(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("gen", stderr)
	out := f.String("out", "", "dataset directory to create")
	lists := f.String("lists", "", "directory for small.list and large.list")
	small := f.Int("small", 20000, "number of small files")
	dirs := f.Int("dirs", 100, "directories the small files are spread over")
	smallSize := byteSize(110000)
	largeSize := byteSize(2 << 30)
	f.Var(&smallSize, "small-size", "size of each small file")
	f.Var(&largeSize, "large-size", "size of the large file (0: none)")
	seed := f.Uint64("seed", 1, "random seed")
	if err := parse(f, args); err != nil {
		return err
	}
	if *out == "" || *lists == "" || *small < 0 || *dirs < 1 {
		return usageError{errors.New("gen: want -out DIR -lists DIR, -small >= 0, -dirs >= 1")}
	}
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], *seed)
	rng := rand.NewChaCha8(key)
	buf := make([]byte, 1<<20)
	write := func(rel string, size int64) error {
		p := filepath.Join(*out, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		w, err := os.Create(p)
		if err != nil {
			return err
		}
		for left := size; left > 0; {
			n := min(left, int64(len(buf)))
			rng.Read(buf[:n])
			if _, err := w.Write(buf[:n]); err != nil {
				w.Close()
				return err
			}
			left -= n
		}
		return w.Close()
	}
	names := make([]string, *small)
	for i := range names {
		names[i] = fmt.Sprintf("small/d%03d/f%06d.bin", i%*dirs, i)
		if err := write(names[i], int64(smallSize)); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
	}
	shuf := rand.New(rand.NewPCG(*seed, 2))
	shuf.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	if err := writeList(filepath.Join(*lists, "small.list"), names); err != nil {
		return err
	}
	var large []string
	if largeSize > 0 {
		large = []string{"large/large.bin"}
		if err := write(large[0], int64(largeSize)); err != nil {
			return fmt.Errorf("gen: %w", err)
		}
	}
	if err := writeList(filepath.Join(*lists, "large.list"), large); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "readpath gen: %d files of %d bytes, large file %d bytes, in %s\n",
		*small, int64(smallSize), int64(largeSize), *out)
	return nil
}

func writeList(p string, names []string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	data := strings.Join(names, "\n")
	if len(names) > 0 {
		data += "\n"
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	return nil
}

// ---- read ----

type tagList map[string]string

func (t tagList) String() string { return fmt.Sprint(map[string]string(t)) }

func (t tagList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	t[k] = v
	return nil
}

// Result is one run of read, printed as one JSON line.
type Result struct {
	Tags        map[string]string `json:"tags,omitempty"`
	Dir         string            `json:"dir"`
	Concurrency int               `json:"concurrency"`
	BufSize     int               `json:"bufsize"`
	Files       int               `json:"files"`
	Bytes       int64             `json:"bytes"`
	Seconds     float64           `json:"seconds"`
	MBps        float64           `json:"mb_s"`
	FilesPerSec float64           `json:"files_s"`
	OpenP50us   float64           `json:"open_p50_us"`
	OpenP99us   float64           `json:"open_p99_us"`
	// With -cpu-pid: that process's user+system CPU seconds during the
	// run, and the same in milliseconds per 1,000 files opened.
	CPUSeconds     float64 `json:"cpu_s,omitempty"`
	CPUmsPer1000Op float64 `json:"cpu_ms_per_1000_opens,omitempty"`
}

func runRead(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("read", stderr)
	dir := f.String("dir", "", "directory the listed paths are relative to")
	files := f.String("files", "", "file with one relative path per line, read in this order")
	conc := f.Int("concurrency", 1, "concurrent readers")
	bufSize := byteSize(1 << 20)
	f.Var(&bufSize, "bufsize", "read(2) buffer size")
	cpuPid := f.Int("cpu-pid", 0, "measure this process's CPU time during the run (0: none)")
	tags := tagList{}
	f.Var(tags, "tag", "key=value copied into the result (repeatable)")
	if err := parse(f, args); err != nil {
		return err
	}
	if *dir == "" || *files == "" || *conc < 1 || bufSize < 1 {
		return usageError{errors.New("read: want -dir DIR -files LIST, -concurrency >= 1, -bufsize >= 1")}
	}
	names, err := readList(*files)
	if err != nil {
		return err
	}
	var cpu0 float64
	if *cpuPid > 0 {
		if cpu0, err = cpuSeconds(*cpuPid); err != nil {
			return err
		}
	}
	res, err := readAll(*dir, names, *conc, int(bufSize))
	if err != nil {
		return err
	}
	if *cpuPid > 0 {
		cpu1, err := cpuSeconds(*cpuPid)
		if err != nil {
			return err
		}
		res.CPUSeconds = cpu1 - cpu0
		res.CPUmsPer1000Op = res.CPUSeconds * 1e3 / float64(res.Files) * 1000
	}
	res.Tags = tags
	return json.NewEncoder(stdout).Encode(res)
}

// cpuSeconds is the user+system CPU time of process pid, all threads, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read: cpu of %d: %w", pid, err)
	}
	// The command name may hold spaces: fields start after the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("read: cpu of %d: malformed /proc/%d/stat", pid, pid)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("read: cpu of %d: malformed /proc/%d/stat", pid, pid)
	}
	const clkTck = 100 // sysconf(_SC_CLK_TCK) on Linux
	return (ut + st) / clkTck, nil
}

func readList(p string) ([]string, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	var names []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			names = append(names, l)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("read: %s lists no files", p)
	}
	return names, nil
}

// readAll reads every file with conc goroutines taking the next file from
// a shared counter. Plain syscalls keep the harness's own cost the same and
// small on both sides.
func readAll(dir string, names []string, conc, bufSize int) (*Result, error) {
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, n)
	}
	opens := make([]time.Duration, len(paths))
	var (
		next  atomic.Int64
		total atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	fail := func(err error) { once.Do(func() { first = err }) }
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, bufSize)
			var got int64
			defer func() { total.Add(got) }()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(paths) {
					return
				}
				t0 := time.Now()
				// A FUSE open interrupted by a signal (the Go runtime's
				// preemption signals too) may answer EINTR; os.Open retries
				// it, and so do we.
				fd, err := syscall.Open(paths[i], syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
				for err == syscall.EINTR {
					fd, err = syscall.Open(paths[i], syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
				}
				opens[i] = time.Since(t0)
				if err != nil {
					fail(fmt.Errorf("read: open %s: %w", paths[i], err))
					return
				}
				for {
					n, err := syscall.Read(fd, buf)
					if err == syscall.EINTR {
						continue
					}
					if err != nil {
						syscall.Close(fd)
						fail(fmt.Errorf("read: read %s: %w", paths[i], err))
						return
					}
					if n == 0 {
						break
					}
					got += int64(n)
				}
				if err := syscall.Close(fd); err != nil {
					fail(fmt.Errorf("read: close %s: %w", paths[i], err))
					return
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if first != nil {
		return nil, first
	}
	slices.Sort(opens)
	pct := func(q float64) float64 {
		return float64(opens[int(q*float64(len(opens)-1))].Nanoseconds()) / 1e3
	}
	return &Result{
		Dir: dir, Concurrency: conc, BufSize: bufSize,
		Files: len(paths), Bytes: total.Load(), Seconds: secs,
		MBps:        float64(total.Load()) / 1e6 / secs,
		FilesPerSec: float64(len(paths)) / secs,
		OpenP50us:   pct(0.50),
		OpenP99us:   pct(0.99),
	}, nil
}

// ---- report ----

// Targets of DESIGN.md, by case name prefix.
var targets = []struct {
	prefix string
	min    float64
}{{"large", 0.95}, {"small-cold", 0.8}, {"small-warm", 0.35}}

func target(c string) float64 {
	for _, t := range targets {
		if strings.HasPrefix(c, t.prefix) {
			return t.min
		}
	}
	return 0
}

type group struct {
	bin, cs, mode, validate string
	native, mount           map[string]Result // by rep
	reps                    []string
}

func runReport(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("report", stderr)
	if err := parse(f, args); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return usageError{errors.New("report: want one RESULTS.jsonl")}
	}
	fh, err := os.Open(f.Arg(0))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer fh.Close()
	var order []string
	groups := map[string]*group{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("report: %s: %w", f.Arg(0), err)
		}
		t := r.Tags
		key := t["bin"] + "|" + t["case"] + "|" + t["mode"] + "|" + t["validate"]
		g := groups[key]
		if g == nil {
			g = &group{bin: t["bin"], cs: t["case"], mode: t["mode"], validate: t["validate"],
				native: map[string]Result{}, mount: map[string]Result{}}
			groups[key] = g
			order = append(order, key)
		}
		switch t["side"] {
		case "native":
			g.native[t["rep"]] = r
		case "mount":
			g.mount[t["rep"]] = r
			g.reps = append(g.reps, t["rep"])
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	caseRank := map[string]int{"large-cold": 0, "large-warm": 1, "small-cold": 2, "small-cold-again": 3, "small-warm": 4}
	sort.SliceStable(order, func(i, j int) bool {
		return caseRank[groups[order[i]].cs] < caseRank[groups[order[j]].cs]
	})
	withBin := false
	for _, g := range groups {
		withBin = withBin || g.bin != ""
	}
	binCol, binSep := "", ""
	if withBin {
		binCol, binSep = " binary |", "---|"
	}
	fmt.Fprintln(stdout, "| case |"+binCol+" mount mode | validate | native MB/s | mount MB/s | mount/native | target | open p50 µs native / mount | daemon CPU ms per 1,000 opens | runs |")
	fmt.Fprintln(stdout, "|---|"+binSep+"---|---|---|---|---|---|---|---|---|")
	for _, k := range order {
		g := groups[k]
		var nat, mnt, ratio, onat, omnt, cpu []float64
		for _, rep := range g.reps {
			n, ok := g.native[rep]
			if !ok {
				continue
			}
			m := g.mount[rep]
			if n.Bytes != m.Bytes {
				fmt.Fprintf(stderr, "readpath report: %s rep %s: native read %d bytes, mount %d\n", k, rep, n.Bytes, m.Bytes)
			}
			nat, mnt = append(nat, n.MBps), append(mnt, m.MBps)
			ratio = append(ratio, m.MBps/n.MBps)
			onat, omnt = append(onat, n.OpenP50us), append(omnt, m.OpenP50us)
			if m.CPUmsPer1000Op > 0 && m.Files >= 1000 {
				cpu = append(cpu, m.CPUmsPer1000Op)
			}
		}
		if len(ratio) == 0 {
			continue
		}
		tg := target(g.cs)
		verdict := "—"
		if tg > 0 {
			verdict = fmt.Sprintf("≥ %.2f: %s", tg, map[bool]string{true: "met", false: "**not met**"}[median(ratio) >= tg])
		}
		bin := ""
		if withBin {
			bin = " " + g.bin + " |"
		}
		cpuCell := "–"
		if len(cpu) > 0 {
			cpuCell = spread(cpu, "%.0f")
		}
		fmt.Fprintf(stdout, "| %s |%s %s | %s | %s | %s | %s | %s | %.0f / %.0f | %s | %d |\n",
			g.cs, bin, g.mode, g.validate, spread(nat, "%.0f"), spread(mnt, "%.0f"), spread(ratio, "%.2f"),
			verdict, median(onat), median(omnt), cpuCell, len(ratio))
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread formats "median (min–max)".
func spread(v []float64, format string) string {
	return fmt.Sprintf(format+" ("+format+"–"+format+")", median(v), slices.Min(v), slices.Max(v))
}

// ---- epochs ----

type epochRun struct {
	Epoch   int     `json:"epoch"`
	Seconds float64 `json:"seconds"`
	Samples int     `json:"samples"`
	Bytes   int64   `json:"bytes"`
}

func runEpochs(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("epochs", stderr)
	epochs := f.Int("epochs", 3, "number of epochs")
	conc := f.Int("concurrency", 8, "concurrent readers")
	seed := f.Uint64("seed", 0, "seed of the orders")
	drop := f.Bool("drop-caches", false, "sync and drop the page cache before each epoch (root)")
	snap := f.String("snapshot", "", "shell command printing key=value counters, run before epoch 1 and after each epoch")
	if err := parse(f, args); err != nil {
		return err
	}
	if f.NArg() != 1 || *epochs < 1 || *conc < 1 {
		return usageError{errors.New("epochs: want one DIR, -epochs >= 1, -concurrency >= 1")}
	}
	dir := f.Arg(0)
	t0 := time.Now()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("epochs: %w", err)
	}
	if len(names) == 0 {
		return fmt.Errorf("epochs: no files under %s", dir)
	}
	sort.Strings(names)
	out := struct {
		ScanS     float64             `json:"scan_s"`
		Samples   int                 `json:"samples"`
		Epochs    []epochRun          `json:"epochs"`
		Snapshots []map[string]string `json:"snapshots"`
	}{ScanS: time.Since(t0).Seconds(), Samples: len(names)}
	s, err := snapshot(*snap)
	if err != nil {
		return err
	}
	out.Snapshots = append(out.Snapshots, s)
	rng := rand.New(rand.NewPCG(*seed, 3))
	for e := 1; e <= *epochs; e++ {
		order := slices.Clone(names)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		if *drop {
			syscall.Sync()
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
				return fmt.Errorf("epochs: drop caches: %w", err)
			}
		}
		res, err := readAll(dir, order, *conc, 1<<20)
		if err != nil {
			return err
		}
		out.Epochs = append(out.Epochs, epochRun{Epoch: e, Seconds: res.Seconds, Samples: res.Files, Bytes: res.Bytes})
		fmt.Fprintf(stderr, "readpath epochs: epoch %d: %.2f s, %.0f files/s\n", e, res.Seconds, res.FilesPerSec)
		if s, err = snapshot(*snap); err != nil {
			return err
		}
		out.Snapshots = append(out.Snapshots, s)
	}
	return json.NewEncoder(stdout).Encode(out)
}

// snapshot runs cmd and parses its key=value lines.
func snapshot(cmd string) (map[string]string, error) {
	kv := map[string]string{}
	if cmd == "" {
		return kv, nil
	}
	data, err := exec.Command("/bin/sh", "-c", cmd).Output()
	if err != nil {
		return nil, fmt.Errorf("epochs: snapshot %q: %w", cmd, err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return kv, nil
}

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/ctlpath"
)

const warmupSynopsis = "warmup [--wait PCT] [--timeout DURATION] [--dry-run] [-f LIST [-z]] MOUNTPOINT [PATH...]"

func warmupFlags(f *pflag.FlagSet) runFunc {
	wait := f.Float64("wait", -1, "wait until PCT percent of the requested bytes are resident")
	timeout := f.Duration("timeout", 0, "give up waiting after this long (exit 3); 0 = no limit")
	dry := f.Bool("dry-run", false, "print the files and bytes and whether they fit the tiers; queue nothing")
	list := f.StringP("f", "f", "", "also warm the paths listed in LIST, one per line ('-': standard input)")
	nul := f.BoolP("z", "z", false, "the paths in LIST end with NUL, not newline (find -print0)")
	return func(pos []string, stdout, stderr io.Writer) error {
		var err error
		if *nul && *list == "" {
			return usageErr("-z needs -f LIST")
		}
		if len(pos) < 1 {
			return usageErr("want MOUNTPOINT (usage: epochfs %s)", warmupSynopsis)
		}
		if *wait > 100 {
			return usageErr("--wait %g: want 0 to 100", *wait)
		}
		mnt, _ := filepath.Abs(pos[0])
		st, err := readStatus(mnt)
		if err != nil {
			return runtimeErr("%s is not an epochfs mount or its daemon does not answer: %v", mnt, err)
		}
		paths := pos[1:]
		if *list != "" {
			listed, err := ctlpath.ReadList(*list, *nul, os.Stdin)
			if err != nil {
				return usageErr("%v", err)
			}
			if len(listed) == 0 {
				return usageErr("-f %s: no paths in it", *list)
			}
			paths = append(paths, listed...)
		}
		var rels []string
		for _, p := range paths {
			rel, err := datasetPath(mnt, p)
			if err != nil {
				return err
			}
			rels = append(rels, rel)
		}
		if *dry {
			return warmupDryRun(mnt, rels, st, stdout)
		}
		docs := []string{"all\n"}
		if len(rels) > 0 {
			docs = ctlpath.Docs(rels, ctlpath.DocMax)
		}
		for _, doc := range docs {
			if err := os.WriteFile(filepath.Join(mnt, ".epochfs", "warmup"), []byte(doc), 0); err != nil {
				if errors.Is(err, syscall.EINVAL) {
					return usageErr("%s", lastCtlError(mnt, err))
				}
				return runtimeErr("queue warmup: %v", err)
			}
		}
		if *wait < 0 {
			w, err := readWarmup(mnt)
			if err != nil {
				return runtimeErr("%v", err)
			}
			fmt.Fprintf(stdout, "queued %d files (%s); %.1f%% resident\n", w.files, config.FormatBytes(w.bytesTotal), w.pct)
			return nil
		}
		return waitWarmup(mnt, *wait, *timeout, stdout)
	}
}

// datasetPath turns a path given on the command line into a dataset path:
// absolute paths must lie under the mount; relative ones are taken from
// the dataset root.
func datasetPath(mnt, p string) (string, error) {
	if !filepath.IsAbs(p) {
		return filepath.ToSlash(filepath.Clean(p)), nil
	}
	rel, err := filepath.Rel(mnt, filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", usageErr("%s is not under the mount point %s", p, mnt)
	}
	return filepath.ToSlash(rel), nil
}

func lastCtlError(mnt string, fallback error) string {
	data, err := os.ReadFile(filepath.Join(mnt, ".epochfs", "errors"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if err != nil || len(lines) == 0 || lines[len(lines)-1] == "" {
		return fallback.Error()
	}
	l := lines[len(lines)-1]
	if _, rest, ok := strings.Cut(l, " "); ok {
		return rest
	}
	return l
}

type warmupState struct {
	files, done, skipped, bytesDone, bytesTotal int64
	pct                                         float64
}

func readWarmup(mnt string) (warmupState, error) {
	data, err := os.ReadFile(filepath.Join(mnt, ".epochfs", "warmup"))
	if err != nil {
		return warmupState{}, fmt.Errorf("read warmup progress: %w", err)
	}
	kv := parseKV(data)
	n := func(k string) int64 { v, _ := strconv.ParseInt(kv[k], 10, 64); return v }
	pct, _ := strconv.ParseFloat(kv["pct"], 64)
	return warmupState{files: n("queued"), done: n("done"), skipped: n("skipped"),
		bytesDone: n("bytes_done"), bytesTotal: n("bytes_total"), pct: pct}, nil
}

func waitWarmup(mnt string, target float64, timeout time.Duration, stdout io.Writer) error {
	tty := isTerminal(stdout)
	start := time.Now()
	lastLine := time.Time{}
	for {
		w, err := readWarmup(mnt)
		if err != nil {
			return runtimeErr("%v", err)
		}
		finished := w.pct >= target
		stuck := w.done+w.skipped >= w.files && !finished
		if tty {
			fmt.Fprintf(stdout, "\r%s", progressBar(w, time.Since(start)))
		} else if finished || stuck || time.Since(lastLine) >= 5*time.Second {
			fmt.Fprintln(stdout, progressLine(w, time.Since(start)))
			lastLine = time.Now()
		}
		if finished {
			if tty {
				fmt.Fprintln(stdout)
			}
			return nil
		}
		if stuck {
			if tty {
				fmt.Fprintln(stdout)
			}
			return runtimeErr("%d files (%s) do not fit the tiers; %.1f%% of the requested bytes are resident",
				w.skipped, config.FormatBytes(w.bytesTotal-w.bytesDone), w.pct)
		}
		if timeout > 0 && time.Since(start) >= timeout {
			if tty {
				fmt.Fprintln(stdout)
			}
			return &exitError{code: exitTimeout, err: fmt.Errorf("timed out after %s at %.1f%% (wanted %g%%)", timeout, w.pct, target)}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func progressLine(w warmupState, el time.Duration) string {
	return fmt.Sprintf("warmup: %.1f%% %d/%d files %s/%s elapsed %s",
		w.pct, w.done, w.files, config.FormatBytes(w.bytesDone), config.FormatBytes(w.bytesTotal), el.Round(time.Second))
}

func progressBar(w warmupState, el time.Duration) string {
	const width = 30
	fill := int(w.pct / 100 * width)
	if fill > width {
		fill = width
	}
	eta := "--"
	if w.bytesDone > 0 && w.bytesDone < w.bytesTotal {
		rate := float64(w.bytesDone) / el.Seconds()
		eta = (time.Duration(float64(w.bytesTotal-w.bytesDone)/rate) * time.Second / time.Second).Round(time.Second).String()
	}
	return fmt.Sprintf("[%s%s] %5.1f%%  %d/%d files  %s/%s  ETA %s   ",
		strings.Repeat("#", fill), strings.Repeat(".", width-fill), w.pct, w.done, w.files,
		config.FormatBytes(w.bytesDone), config.FormatBytes(w.bytesTotal), eta)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// warmupDryRun walks the requested paths through the mount and reports
// whether the bytes not yet resident fit the tiers' free quota.
func warmupDryRun(mnt string, rels []string, st map[string]string, stdout io.Writer) error {
	if len(rels) == 0 {
		rels = []string{"."}
	}
	var files, bytes, missFiles, missBytes int64
	buf := make([]byte, 64)
	for _, rel := range rels {
		root := filepath.Join(mnt, rel)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == filepath.Join(mnt, ".epochfs") {
				return filepath.SkipDir
			}
			if !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			files++
			bytes += info.Size()
			n, err := syscall.Getxattr(p, "user.epochfs.tier", buf)
			if err != nil || string(buf[:n]) == "source" {
				missFiles++
				missBytes += info.Size()
			}
			return nil
		})
		if err != nil {
			return usageErr("%s: %v", rel, err)
		}
	}
	var free int64
	for k, v := range st {
		if strings.HasPrefix(k, "tier.") && strings.HasSuffix(k, ".quota") {
			name := strings.TrimSuffix(strings.TrimPrefix(k, "tier."), ".quota")
			q, _ := strconv.ParseInt(v, 10, 64)
			u, _ := strconv.ParseInt(st["tier."+name+".used"], 10, 64)
			free += q - u
		}
	}
	fits := "fits"
	if missBytes > free {
		fits = fmt.Sprintf("does NOT fit (short by %s)", config.FormatBytes(missBytes-free))
	}
	fmt.Fprintf(stdout, "files:        %d (%s)\nto copy:      %d (%s)\ntier room:    %s\nresult:       %s\n",
		files, config.FormatBytes(bytes), missFiles, config.FormatBytes(missBytes), config.FormatBytes(free), fits)
	return nil
}

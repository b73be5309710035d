// Command datagen writes an ImageNet-like JPEG dataset (and optionally
// WebDataset shards of it) for epochfs's tests, demo and benchmarks:
//
//	go run ./test/datagen/cmd/datagen -out /tmp/ds -files 2000 [-classes 10] [-seed 1] [-shards]
//
// It prints a one-line summary; on a terminal, a progress line too.
// Exit codes: 0 success, 1 runtime error, 2 usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/test/datagen"
)

const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, isTerminal(os.Stderr))
	stop()
	os.Exit(code)
}

// byteSize is a flag value that accepts plain byte counts and K/M/G with
// optional B (powers of 1000) or iB (powers of 1024): 110000, 110KB, 256MiB.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func parseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{
		{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
		{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
		{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1},
	} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q (want e.g. 110000, 110KB, 256MiB)", s)
	}
	return n * mult, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) int {
	fl := flag.NewFlagSet("datagen", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	var (
		o          datagen.Options
		meanBytes  = byteSize(datagen.DefaultMeanBytes)
		shardBytes = byteSize(datagen.DefaultShardBytes)
		photos     string
	)
	fl.StringVar(&o.Dir, "out", "", "output directory (created; must be empty or absent)")
	fl.IntVar(&o.Files, "files", 0, "number of JPEG samples")
	fl.IntVar(&o.Classes, "classes", datagen.DefaultClasses, "number of class directories")
	fl.Int64Var(&o.Seed, "seed", 1, "random seed; the same seed and flags give the same bytes")
	fl.IntVar(&o.Width, "width", datagen.DefaultWidth, "nominal sample width (varies ±20%)")
	fl.IntVar(&o.Height, "height", datagen.DefaultHeight, "nominal sample height (varies ±20%)")
	fl.Var(&meanBytes, "mean-bytes", "target mean file size (e.g. 110KB)")
	fl.BoolVar(&o.Shards, "shards", false, "also write WebDataset tar shards")
	fl.Var(&shardBytes, "shard-bytes", "maximum shard size (e.g. 256MiB)")
	fl.StringVar(&o.ShardDir, "shard-dir", "", "shard directory (default OUT-shards)")
	fl.StringVar(&photos, "photos", datagen.DefaultPhotoDir, "comma-separated directories of source photographs")
	usage := func() {
		fmt.Fprintln(stderr, "usage: datagen -out DIR -files N [-classes K] [-seed S] [-mean-bytes B] [-shards] [-shard-bytes B]")
		fl.SetOutput(stderr)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return exitOK
		}
		fmt.Fprintf(stderr, "datagen: %v (see -h)\n", err)
		return exitUsage
	}
	switch {
	case fl.NArg() > 0:
		fmt.Fprintf(stderr, "datagen: unexpected argument %q (see -h)\n", fl.Arg(0))
		return exitUsage
	case o.Dir == "":
		fmt.Fprintln(stderr, "datagen: -out is required (see -h)")
		return exitUsage
	case o.Files <= 0:
		fmt.Fprintf(stderr, "datagen: -files must be > 0 (got %d)\n", o.Files)
		return exitUsage
	case meanBytes <= 0:
		fmt.Fprintln(stderr, "datagen: -mean-bytes must be > 0")
		return exitUsage
	case shardBytes <= 0:
		fmt.Fprintln(stderr, "datagen: -shard-bytes must be > 0")
		return exitUsage
	case meanBytes > 1<<30:
		fmt.Fprintf(stderr, "datagen: -mean-bytes %d is too large\n", meanBytes)
		return exitUsage
	}
	o.MeanBytes, o.ShardBytes = int(meanBytes), int64(shardBytes)
	for _, d := range strings.Split(photos, ",") {
		if d = strings.TrimSpace(d); d != "" {
			o.PhotoDirs = append(o.PhotoDirs, d)
		}
	}

	start := time.Now()
	if tty {
		var last time.Time
		o.Progress = func(done, total int) {
			if now := time.Now(); done == total || now.Sub(last) >= 100*time.Millisecond {
				last = now
				rate := float64(done) / now.Sub(start).Seconds()
				fmt.Fprintf(stderr, "\rdatagen: %d/%d files (%d%%), %.0f files/s ", done, total, done*100/total, rate)
			}
		}
	}
	m, err := datagen.Generate(ctx, o)
	if tty && o.Progress != nil {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err != nil {
		fmt.Fprintln(stderr, oneLine(err))
		if errors.Is(err, datagen.ErrInvalidOptions) || errors.Is(err, datagen.ErrNotEmpty) {
			return exitUsage
		}
		return exitRuntime
	}
	el := time.Since(start)
	n := len(m.Samples)
	line := fmt.Sprintf("datagen: %d files in %d classes, %s (mean %s) in %.1fs (%.0f files/s) -> %s",
		n, o.Classes, human(m.TotalBytes), human(m.TotalBytes/int64(n)), el.Seconds(), float64(n)/el.Seconds(), o.Dir)
	if o.Shards {
		dir := o.ShardDir
		if dir == "" {
			dir = filepath.Clean(o.Dir) + "-shards"
		}
		plural := "s"
		if len(m.Shards) == 1 {
			plural = ""
		}
		line += fmt.Sprintf("; %d shard%s -> %s", len(m.Shards), plural, dir)
	}
	fmt.Fprintln(stdout, line)
	return exitOK
}

// oneLine keeps an error to one line (errors.Join separates with newlines).
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

func human(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

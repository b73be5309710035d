// Package doctor checks a node's setup for a mount without mounting
// anything (as CernVM-FS's chksetup and JuiceFS's doctor do): the kernel's
// FUSE features, the config, each tier (safe for a root daemon, owned by
// this catalog, on its own disk when it must be, room for its quota), the
// source (readable, and how fast: a short probe), the state directory,
// and the Slurm settings against the config; with a mount point, the live
// mount too. One line per check ("ok", "warn" or "FAIL", its name, what
// was found). `epochfs doctor` prints them.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/mounts"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/tier"
	"golang.org/x/sys/unix"
)

// checker collects the checks' lines.
type checker struct {
	w      io.Writer
	failed int
	warned int
}

func (d *checker) ok(name, format string, a ...any) { d.line("ok", name, format, a...) }
func (d *checker) warn(name, format string, a ...any) {
	d.warned++
	d.line("warn", name, format, a...)
}
func (d *checker) fail(name, format string, a ...any) {
	d.failed++
	d.line("FAIL", name, format, a...)
}
func (d *checker) line(level, name, format string, a ...any) {
	fmt.Fprintf(d.w, "%-4s  %-16s %s\n", level, name, fmt.Sprintf(format, a...))
}

// probeFiles and probeBytes bound the source probe.
const (
	probeFiles = 16
	probeBytes = 64 << 20
	probeTime  = 10 * time.Second
)

// Input is what to check: a config file (ConfigFile; Config is it loaded,
// or ConfigErr why it could not be) and a mount point (Mountpoint); either
// may be empty.
type Input struct {
	ConfigFile string
	Config     config.Config
	ConfigErr  error
	Mountpoint string
}

// Check runs the checks and writes one line per check to w. It returns how
// many failed and how many warned.
func Check(w io.Writer, in Input) (failed, warned int) {
	d := &checker{w: w}
	d.kernel()
	if in.ConfigFile != "" {
		if in.ConfigErr != nil {
			d.fail("config", "%s: %v", in.ConfigFile, in.ConfigErr)
		} else {
			cfg := in.Config
			d.ok("config", "%s: source %s, mount point %s, %d tier(s)", in.ConfigFile, cfg.Source, cfg.Mountpoint, len(cfg.Tiers))
			d.config(cfg)
			d.slurm(in.ConfigFile, cfg)
		}
	}
	if in.Mountpoint != "" {
		d.mount(in.Mountpoint)
	}
	return d.failed, d.warned
}

// kernel checks FUSE, passthrough and FUSE over io_uring.
func (d *checker) kernel() {
	if st, err := os.Stat("/dev/fuse"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		d.fail("fuse", "/dev/fuse is missing (modprobe fuse; in a container, pass the device)")
	} else {
		d.ok("fuse", "/dev/fuse present")
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		rel := unix.ByteSliceToString(u.Release[:])
		var major, minor int
		fmt.Sscanf(rel, "%d.%d", &major, &minor)
		if major > 6 || major == 6 && minor >= 9 {
			d.ok("passthrough", "kernel %s has FUSE passthrough (resident files are read by the kernel)", rel)
		} else {
			d.warn("passthrough", "kernel %s has no FUSE passthrough (6.9+): resident files are read through the daemon", rel)
		}
	}
	switch v, err := os.ReadFile("/sys/module/fuse/parameters/enable_uring"); {
	case err != nil:
		d.warn("io_uring", "the kernel has no FUSE over io_uring (6.14+): requests travel over /dev/fuse")
	case strings.TrimSpace(string(v)) == "Y":
		d.ok("io_uring", "FUSE over io_uring enabled")
	default:
		d.warn("io_uring", "FUSE over io_uring is off: echo Y > /sys/module/fuse/parameters/enable_uring (docs/admin.md)")
	}
}

// config checks the tiers, the source and the state directory of cfg.
func (d *checker) config(cfg config.Config) {
	owner := tier.Owner{StateDir: cfg.StateDir, Source: cfg.Source, Mountpoint: cfg.Mountpoint}
	for _, t := range cfg.Tiers {
		d.tier(t, owner)
	}
	d.source(cfg.Source)
	d.state(cfg.StateDir)
}

func (d *checker) tier(t config.Tier, owner tier.Owner) {
	name := "tier " + t.Name
	if t.RequireMount {
		if err := tier.CheckOwnMount(t.Path); err != nil {
			d.fail(name, "%s: %v", t.Path, err)
			return
		}
	}
	created, err := tier.CheckDir(t.Path)
	if err != nil {
		d.fail(name, "%v", err)
		return
	}
	if !created {
		if err := tier.CheckOwner(t.Path, owner); err != nil {
			d.fail(name, "%v", err)
			return
		}
	}
	quota := t.Quota.Bytes
	free, fsPath := freeBytes(t.Path)
	switch {
	case t.Quota.Raw == config.QuotaFromModel:
		d.ok(name, "%s: quota from the model; %s free on %s", t.Path, config.FormatBytes(int64(free)), fsPath)
	case free < uint64(quota):
		d.warn(name, "%s: quota %s but only %s free on %s: the tier fills its disk before its quota", t.Path, config.FormatBytes(quota), config.FormatBytes(int64(free)), fsPath)
	default:
		what := "usable"
		if created {
			what = "created at the first mount"
		}
		d.ok(name, "%s: %s; quota %s, %s free", t.Path, what, config.FormatBytes(quota), config.FormatBytes(int64(free)))
	}
}

// freeBytes is the free space of the file system of p's nearest existing
// directory.
func freeBytes(p string) (uint64, string) {
	for ; p != "/" && p != "."; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(p, &st); err != nil {
		return 0, p
	}
	return st.Bavail * uint64(st.Bsize), p
}

// source checks that the source is a readable directory and probes how
// fast it opens and reads a few files. It reads the source as the daemon
// does (source.Source): every name resolved beneath the source's root
// without following a symlink, only regular files opened, every call
// bounded by the probe's time.
func (d *checker) source(src string) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTime)
	defer cancel()
	done := make(chan error, 1)
	var files int
	var bytes int64
	var took, firstOpen time.Duration
	go func() {
		start := time.Now()
		s, err := source.Open(source.Options{Root: src, Timeout: probeTime})
		if err != nil {
			done <- err
			return
		}
		defer s.Close()
		buf := make([]byte, 1<<20)
		var walk func(rel string) error
		walk = func(rel string) error {
			des, err := s.ReadDir(ctx, rel)
			if err != nil {
				return err
			}
			for _, e := range des {
				if ctx.Err() != nil || files >= probeFiles || bytes >= probeBytes {
					return nil
				}
				p := path.Join(rel, e.Name())
				switch {
				case e.IsDir():
					if err := walk(p); err != nil {
						return err
					}
					continue
				case !e.Type().IsRegular():
					continue // symlinks, FIFOs, devices: never opened
				}
				t0 := time.Now()
				f, err := s.Open(ctx, p)
				if err != nil {
					return err
				}
				if files == 0 {
					firstOpen = time.Since(t0)
				}
				n, err := probeRead(ctx, f, buf, probeBytes-bytes)
				f.Close()
				if err != nil {
					return err
				}
				files++
				bytes += n
			}
			return nil
		}
		err = walk("")
		took = time.Since(start)
		done <- err
	}()
	select {
	case err := <-done:
		switch {
		case err != nil:
			d.fail("source", "%s: %v", src, err)
		case files == 0:
			d.warn("source", "%s: readable, but no file found to probe", src)
		default:
			mbps := float64(bytes) / 1e6 / max(took.Seconds(), 1e-6)
			d.ok("source", "%s: read %d files (%s) in %s: %.1f MB/s, %.1f ms per file, first open %.1f ms",
				src, files, config.FormatBytes(bytes), took.Round(time.Millisecond), mbps,
				float64(took.Microseconds())/1e3/float64(files), float64(firstOpen.Microseconds())/1e3)
		}
	case <-ctx.Done():
		d.fail("source", "%s: no answer within %s (a hung PFS?)", src, probeTime)
	}
}

// probeRead reads f from its start until EOF or limit bytes.
func probeRead(ctx context.Context, f *source.File, buf []byte, limit int64) (int64, error) {
	var off int64
	for off < limit {
		n, err := f.ReadAt(ctx, buf[:min(int64(len(buf)), limit-off)], off)
		off += int64(n)
		if errors.Is(err, io.EOF) || n == 0 {
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
	return off, nil
}

// state checks the state directory: safe, writable, room for the catalog.
func (d *checker) state(dir string) {
	created, err := tier.CheckDir(dir)
	if err != nil {
		d.fail("state", "%v", err)
		return
	}
	free, fsPath := freeBytes(dir)
	if free < 160<<20 {
		d.warn("state", "%s: %s free on %s, under the catalog's floor of 160 MiB: the catalog would not be written", dir, config.FormatBytes(int64(free)), fsPath)
		return
	}
	if !created {
		if r, ok := mounts.RecordOfState(dir); ok {
			d.ok("state", "%s: in use by the mount at %s (pid %d)", dir, r.Mountpoint, r.PID)
			return
		}
	}
	what := "usable"
	if created {
		what = "created at the first mount"
	}
	d.ok("state", "%s: %s, %s free", dir, what, config.FormatBytes(int64(free)))
}

// slurm compares the Slurm settings (epochfs.env beside slurm.conf) with
// the config, when there are any.
func (d *checker) slurm(cfgFile string, cfg config.Config) {
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		conf = "/etc/slurm/slurm.conf"
	}
	envFile := filepath.Join(filepath.Dir(conf), "epochfs.env")
	data, err := os.ReadFile(envFile)
	if err != nil {
		return // not a Slurm node of epochfs's
	}
	vals := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && !strings.HasPrefix(k, "#") {
			vals[k] = strings.Trim(strings.TrimSpace(strings.SplitN(v, "#", 2)[0]), `"'`)
		}
	}
	abs, _ := filepath.Abs(cfgFile)
	if c := vals["EPOCHFS_CONFIG"]; c != cfgFile && c != abs {
		d.warn("slurm", "%s names EPOCHFS_CONFIG=%s, not %s: the prolog mounts that one", envFile, c, cfgFile)
		return
	}
	if m := vals["EPOCHFS_MOUNT"]; m != "" && m != cfg.Mountpoint {
		d.fail("slurm", "%s sets EPOCHFS_MOUNT=%s, not the config's mountpoint %s: the prolog refuses to mount (remove it)", envFile, m, cfg.Mountpoint)
		return
	}
	d.ok("slurm", "%s agrees with %s", envFile, cfgFile)
}

// mount checks a live mount.
func (d *checker) mount(mnt string) {
	m, mounted := mounts.FindMount(mnt)
	if !mounted || !m.Epochfs() {
		d.fail("mount", "%s: no epochfs mount there", mnt)
		return
	}
	st, err := mounts.StatusWithin(mnt, mounts.StatusTimeout)
	if err != nil {
		d.fail("mount", "%s: mounted, but its daemon does not answer: %v", mnt, err)
		return
	}
	d.ok("mount", "%s: %s, pid %s, transport %s, passthrough %s, %s%% resident", mnt, m.Source, st["pid"], st["transport"], st["passthrough"], st["resident_pct"])
	if s := st["source_state"]; s != "" && s != "available" {
		d.fail("mount source", "%s: the source is %s since %s", mnt, s, st["source_unavailable_since"])
	}
	if c := st["catalog"]; c == "degraded" {
		d.warn("mount catalog", "%s: the catalog is not being written (state directory full?)", mnt)
	}
}

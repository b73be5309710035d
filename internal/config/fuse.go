package config

import "fmt"

// Fuse configures the FUSE transport: how requests travel between the
// kernel and the daemon.
type Fuse struct {
	// IoUring is "auto" (FUSE over io_uring when the kernel offers it,
	// otherwise read(2)/write(2) on /dev/fuse), "on" (refuse to mount
	// without it) or "off" (always /dev/fuse).
	IoUring string `toml:"io_uring"`
	// Prewarm makes a mount open the copies a former mount left in the
	// tiers, and register them for passthrough, in the background right
	// after mounting, so that the next job's first epoch opens them as a
	// later epoch does (default true).
	Prewarm bool `toml:"prewarm"`
}

// DefaultFuse is the [fuse] section's default.
func DefaultFuse() Fuse { return Fuse{IoUring: "auto", Prewarm: true} }

// Validate checks the [fuse] keys.
func (f *Fuse) Validate() error {
	switch f.IoUring {
	case "auto", "on", "off":
		return nil
	}
	return fmt.Errorf("fuse.io_uring = %q: want \"auto\", \"on\" or \"off\"", f.IoUring)
}

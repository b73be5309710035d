package config

import "fmt"

// Fuse configures the FUSE transport: how requests travel between the
// kernel and the daemon.
type Fuse struct {
	// IoUring is "auto" (FUSE over io_uring when the kernel offers it,
	// otherwise read(2)/write(2) on /dev/fuse), "on" (refuse to mount
	// without it) or "off" (always /dev/fuse).
	IoUring string `toml:"io_uring"`
}

// DefaultFuse is the [fuse] section's default.
func DefaultFuse() Fuse { return Fuse{IoUring: "auto"} }

// Validate checks the [fuse] keys.
func (f *Fuse) Validate() error {
	switch f.IoUring {
	case "auto", "on", "off":
		return nil
	}
	return fmt.Errorf("fuse.io_uring = %q: want \"auto\", \"on\" or \"off\"", f.IoUring)
}

package config

import (
	"fmt"
	"net"
	"strconv"
)

// Metrics is the [metrics] section: the Prometheus endpoint of the mount.
type Metrics struct {
	// Listen is the endpoint's address, host:port (e.g.
	// "127.0.0.1:9464"); "" (the default) serves no metrics. A bare
	// ":9464" is refused: listening on every interface is asked for by
	// name ("0.0.0.0:9464").
	Listen string `toml:"listen"`
	// Pprof also serves Go's profiles (net/http/pprof) under
	// /debug/pprof/ on the same address, for finding where the daemon's
	// time goes. Off by default, and refused unless Listen is a loopback
	// address: a profile shows the daemon's memory and command line.
	Pprof bool `toml:"pprof"`
}

// Validate checks the [metrics] section.
func (m *Metrics) Validate() error {
	if m.Listen == "" {
		if m.Pprof {
			return fmt.Errorf("metrics.pprof = true needs metrics.listen, the address to serve it on")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(m.Listen)
	if err != nil {
		return fmt.Errorf("metrics.listen = %q: want HOST:PORT, e.g. \"127.0.0.1:9464\"", m.Listen)
	}
	if host == "" {
		return fmt.Errorf("metrics.listen = %q: give the address to listen on, e.g. \"127.0.0.1:%s\" (\"0.0.0.0:%s\" for every interface)", m.Listen, port, port)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("metrics.listen = %q: port %q: want 0 to 65535", m.Listen, port)
	}
	if m.Pprof && !loopback(host) {
		return fmt.Errorf("metrics.pprof = true with metrics.listen = %q: profiles are served on a loopback address only (e.g. \"127.0.0.1:%s\")", m.Listen, port)
	}
	return nil
}

// loopback reports whether host names only this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

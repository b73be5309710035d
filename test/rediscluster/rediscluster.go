// Package rediscluster starts a real Redis Cluster for tests: Debian's
// redis-server, one process per master on free localhost ports, joined by
// `redis-cli --cluster create --cluster-replicas 0`. Every process is
// started by the test, stopped by its PID at cleanup, and keeps its files
// in the test's temporary directory.
//
// A test skips when redis-server is missing, unless EPOCHFS_REQUIRE_FUSE=1
// (CI) is set: then it fails (internal/testenv).
package rediscluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/testenv"
)

// Options configure Start.
type Options struct {
	Masters  int    // default 3
	Password string // requirepass; "" for none
	// NodeTimeout is cluster-node-timeout (default 1s): how long a dead
	// master takes to fail the cluster's state.
	NodeTimeout time.Duration
}

// Cluster is a running Redis Cluster.
type Cluster struct {
	t     testing.TB
	o     Options
	dir   string
	ports []int
	procs []*exec.Cmd
}

// Available reports whether redis-server and redis-cli are installed.
func Available() bool {
	_, e1 := exec.LookPath("redis-server")
	_, e2 := exec.LookPath("redis-cli")
	return e1 == nil && e2 == nil
}

// Require skips (or fails, see the package comment) without Redis.
func Require(t testing.TB) {
	t.Helper()
	if Available() {
		return
	}
	testenv.Skip(t, "redis-server or redis-cli not installed (apt-get install redis-server redis-tools)")
}

// Start starts the cluster and waits until its state is ok.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	Require(t)
	if o.Masters <= 0 {
		o.Masters = 3
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = time.Second
	}
	c := &Cluster{t: t, o: o, dir: t.TempDir()}
	c.procs = make([]*exec.Cmd, o.Masters)
	t.Cleanup(c.stopAll)
	for i := range o.Masters {
		c.ports = append(c.ports, freePort(t, c.ports))
		c.start(i)
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := c.cli(0, args...); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK()
	return c
}

// freePort picks a port whose cluster bus port (port+10000) is free too.
func freePort(t testing.TB, taken []int) int {
	for range 200 {
		p := 20000 + rand.IntN(15000)
		busy := false
		for _, q := range taken {
			if q == p {
				busy = true
			}
		}
		if busy || !portFree(p) || !portFree(p+10000) {
			continue
		}
		return p
	}
	t.Fatal("no free port pair for a Redis node")
	return 0
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// start starts node i's redis-server (its nodes.conf keeps its identity
// across restarts).
func (c *Cluster) start(i int) {
	c.t.Helper()
	dir := filepath.Join(c.dir, strconv.Itoa(i))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.t.Fatal(err)
	}
	args := []string{
		"--port", strconv.Itoa(c.ports[i]), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--cluster-node-timeout", strconv.FormatInt(c.o.NodeTimeout.Milliseconds(), 10),
		"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no",
		"--maxmemory", "256mb", "--maxmemory-policy", "noeviction",
		"--logfile", filepath.Join(dir, "redis.log"),
	}
	if c.o.Password != "" {
		args = append(args, "--requirepass", c.o.Password, "--masterauth", c.o.Password)
	}
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start redis-server: %v", err)
	}
	c.procs[i] = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		if out, err := c.cli(i, "PING"); err == nil && strings.Contains(out, "PONG") {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			c.t.Fatalf("redis-server on port %d did not answer within 10s\n%s", c.ports[i], log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addrs are the masters' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, p := range c.ports {
		out = append(out, "127.0.0.1:"+strconv.Itoa(p))
	}
	return out
}

// cli runs redis-cli against node i.
func (c *Cluster) cli(i int, args ...string) (string, error) {
	base := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(c.ports[i])}
	if c.o.Password != "" {
		base = append(base, "--no-auth-warning", "-a", c.o.Password)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", append(base, args...)...).CombinedOutput()
	return string(out), err
}

// CLI runs redis-cli -c (following redirections) against a live master.
func (c *Cluster) CLI(args ...string) (string, error) {
	for i, p := range c.procs {
		if p != nil {
			return c.cli(i, append([]string{"-c"}, args...)...)
		}
	}
	return "", fmt.Errorf("rediscluster: no live master")
}

// SetRaw stores value at key (through redis-cli -x, value on its stdin).
func (c *Cluster) SetRaw(key string, value []byte) error {
	for i, p := range c.procs {
		if p == nil {
			continue
		}
		base := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(c.ports[i]), "-c", "-x"}
		if c.o.Password != "" {
			base = append(base, "--no-auth-warning", "-a", c.o.Password)
		}
		cmd := exec.Command("redis-cli", append(base, "SET", key)...)
		cmd.Stdin = strings.NewReader(string(value))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "OK") {
			return fmt.Errorf("redis-cli SET %s: %v: %s", key, err, out)
		}
		return nil
	}
	return fmt.Errorf("rediscluster: no live master")
}

// WaitOK waits until every live master reports cluster_state:ok.
func (c *Cluster) WaitOK() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for i, p := range c.procs {
			if p == nil {
				continue
			}
			out, err := c.cli(i, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(out, "cluster_state:ok") {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatal("the Redis Cluster's state is not ok after 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill kills master i with SIGKILL.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	p := c.procs[i]
	if p == nil {
		return
	}
	p.Process.Kill()
	p.Wait()
	c.procs[i] = nil
}

// Restart starts master i again after Kill and waits for the cluster.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.start(i)
	c.WaitOK()
}

// stopAll stops every node by its PID.
func (c *Cluster) stopAll() {
	for i, p := range c.procs {
		if p == nil {
			continue
		}
		p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			p.Process.Kill()
			<-done
		}
		c.procs[i] = nil
	}
}

// StartPlain starts one redis-server without cluster support (a server a
// mount must refuse) and returns its address; it is stopped at cleanup.
func StartPlain(t testing.TB) string {
	t.Helper()
	Require(t)
	c := &Cluster{t: t, o: Options{Masters: 1, NodeTimeout: time.Second}, dir: t.TempDir()}
	c.procs = make([]*exec.Cmd, 1)
	t.Cleanup(c.stopAll)
	c.ports = []int{freePort(t, nil)}
	port := strconv.Itoa(c.ports[0])
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", c.dir, "--logfile", filepath.Join(c.dir, "redis.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	c.procs[0] = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		if out, err := c.cli(0, "PING"); err == nil && strings.Contains(out, "PONG") {
			return "127.0.0.1:" + port
		}
		if time.Now().After(deadline) {
			t.Fatal("plain redis-server did not answer within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ClosedPort is a localhost address nothing listens on.
func ClosedPort(t testing.TB) string {
	return "127.0.0.1:" + strconv.Itoa(freePort(t, nil))
}

// Command faultfs mounts a loopback of a directory whose failures a test
// switches on and off: the "source" that epochfs's end-to-end tests make
// fail, hang or die.
//
//	faultfs [--debug] [--control] DIR MOUNTPOINT
//
// The mount is read-only. faultfs runs in the foreground, prints "ready" on
// stdout once the mount is up, and unmounts on SIGTERM or SIGINT. Every
// request reaches this process: no kernel caching of entries or attributes
// (timeouts 0), no FUSE passthrough, and no FOPEN_KEEP_CACHE (an open drops
// the file's cached pages).
//
// Modes:
//   - SIGUSR1 (or the line "down" on stdin with --control): every request
//     but FORGET and RELEASE answers EIO, like sshfs whose sshd was killed.
//     The process prints "down" on stdout once the mode has switched.
//   - SIGUSR2 (or "up"): back to normal; prints "up".
//   - SIGSTOP/SIGCONT of the process: a hang. Requests already read from
//     /dev/fuse wait for the answer; new ones stay queued in the kernel.
//   - SIGKILL: a dead source; users of the mount get ENOTCONN.
//
// Commands that only --control takes:
//   - "delay OP DURATION": every request of operation OP (lowercase FUSE
//     operation: lookup, getattr, open, read, opendir, readdir, ...) waits
//     DURATION before it is served ("delay readdir 0s" ends it). Echoed
//     once in force.
//   - "counts": prints "counts OP=N ..." with the requests of each
//     operation since the start, sorted by operation.
//
// With --control, commands come from stdin, one per line, in order (a
// stopped process applies them in order once continued, which signals
// cannot promise), and end of stdin means the controller has gone away:
// faultfs unmounts and exits, so that a test process that dies without
// its cleanups leaves no mount behind.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Exit codes.
const (
	exitOK       = 0
	exitUsage    = 2
	exitMount    = 3
	exitDetached = 4 // the unmount was refused (busy): detached lazily
)

func main() {
	os.Exit(run())
}

func run() int {
	debug := flag.Bool("debug", false, "log every FUSE request on stderr")
	control := flag.Bool("control", false, "read commands (down, up, quit) from stdin; unmount at end of stdin")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: faultfs [--debug] [--control] DIR MOUNTPOINT")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		return exitUsage
	}
	dir, mnt := flag.Arg(0), flag.Arg(1)

	// Subscribe before mounting: a signal that arrives between "ready" and
	// the loop below must not kill the process with the mount up.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT)

	root, err := fusefs.NewLoopbackRoot(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultfs: %v\n", err)
		return exitMount
	}
	zero := time.Duration(0)
	opts := &fusefs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName:      "faultfs",
			Name:        "faultfs",
			AllowOther:  true,
			DirectMount: true,
			// The source epochfs mounts is read-only; so is this
			// mount, which tests change through DIR only.
			Options: []string{"ro"},
			Debug:   *debug,
			// Without the capability the kernel refuses backing files,
			// and go-fuse then serves every read itself.
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
		},
	}
	var down atomic.Bool
	raw := &faultRaw{RawFileSystem: fusefs.NewNodeFS(root, opts), down: &down}
	server, err := fuse.NewServer(raw, mnt, &opts.MountOptions)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultfs: mount %s: %v\n", mnt, err)
		return exitMount
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		fmt.Fprintf(os.Stderr, "faultfs: mount %s: %v\n", mnt, err)
		return exitMount
	}

	cmds := make(chan string)
	if *control {
		go readCommands(cmds)
	}
	fmt.Println("ready")
	for {
		var cmd string
		select {
		case s := <-sigs:
			switch s {
			case syscall.SIGUSR1:
				cmd = "down"
			case syscall.SIGUSR2:
				cmd = "up"
			default:
				cmd = "quit"
			}
		case cmd = <-cmds:
		}
		switch cmd {
		case "down", "up":
			down.Store(cmd == "down")
			// The acknowledgement follows the switch: a request the
			// kernel sends after the controller has read it sees the
			// new mode.
			fmt.Println(cmd)
		case "quit":
			return unmount(server, mnt)
		case "counts":
			fmt.Println(raw.countLine())
		default:
			if op, d, ok := parseDelay(cmd); ok {
				raw.delays.Store(op, d)
				fmt.Println(cmd)
				continue
			}
			fmt.Fprintf(os.Stderr, "faultfs: unknown command %q\n", cmd)
		}
	}
}

// parseDelay parses "delay OP DURATION".
func parseDelay(cmd string) (op string, d time.Duration, ok bool) {
	f := strings.Fields(cmd)
	if len(f) != 3 || f[0] != "delay" {
		return "", 0, false
	}
	d, err := time.ParseDuration(f[2])
	if err != nil || d < 0 {
		return "", 0, false
	}
	return f[1], d, true
}

// readCommands sends stdin's lines to cmds, then "quit" at end of input.
func readCommands(cmds chan<- string) {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmds <- sc.Text()
	}
	cmds <- "quit"
}

// unmount unmounts the mount point. A busy mount (a file still open) is
// detached instead: it disappears from the namespace now, and its open
// files get ENOTCONN once this process exits.
func unmount(server *fuse.Server, mnt string) int {
	// Serve answers in down mode too, so the unmount does not depend on
	// the mode; the last requests may still answer EIO.
	if err := server.Unmount(); err != nil {
		fmt.Fprintf(os.Stderr, "faultfs: unmount %s: %v; detaching\n", mnt, err)
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			fmt.Fprintf(os.Stderr, "faultfs: detach %s: %v\n", mnt, err)
		}
		return exitDetached
	}
	server.Wait()
	return exitOK
}

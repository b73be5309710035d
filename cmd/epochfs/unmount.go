package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func runUnmount(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("unmount", "unmount [--lazy] MOUNTPOINT", stderr)
	lazy := f.Bool("lazy", false, "detach now even if busy or if the daemon is dead")
	pos, err := parseFlags(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("want one MOUNTPOINT")
	}
	mnt, _ := filepath.Abs(pos[0])
	if !isMountpoint(mnt) {
		return usageErr("%s is not mounted", mnt)
	}
	pid := daemonPID(mnt)
	if err := unmount(mnt, *lazy); err != nil {
		return err
	}
	// Wait for the daemon to flush its catalog, so a mount right after
	// reuses every copy.
	if pid > 0 {
		deadline := time.Now().Add(30 * time.Second)
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	fmt.Fprintf(stdout, "epochfs: unmounted %s\n", mnt)
	return nil
}

func unmount(mnt string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = syscall.MNT_DETACH
		}
		err := syscall.Unmount(mnt, flags)
		if errors.Is(err, syscall.EBUSY) {
			return runtimeErr("%s is busy (a process has files open there); close them or use --lazy", mnt)
		}
		if err != nil {
			return runtimeErr("unmount %s: %v", mnt, err)
		}
		return nil
	}
	a := []string{"-u"}
	if lazy {
		a = append(a, "-z")
	}
	out, err := exec.Command("fusermount3", append(a, mnt)...).CombinedOutput()
	if err != nil {
		return runtimeErr("fusermount3: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// daemonPID reads the daemon's pid from the mount's status (0 if the
// daemon does not answer).
func daemonPID(mnt string) int {
	ch := make(chan int, 1)
	go func() {
		kv, err := readStatus(mnt)
		if err != nil {
			ch <- 0
			return
		}
		pid, _ := strconv.Atoi(kv["pid"])
		ch <- pid
	}()
	select {
	case pid := <-ch:
		return pid
	case <-time.After(2 * time.Second):
		return 0
	}
}

func processAlive(pid int) bool {
	// A zombie is not alive for our purpose.
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

package faultfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// pollEvery is how often the harness looks at /proc while it waits.
const pollEvery = 5 * time.Millisecond

// isMounted reports whether dir is a mount point in /proc/mounts.
func isMounted(dir string) bool {
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 1 && unescapeMount(f[1]) == dir {
			return true
		}
	}
	return false
}

// unescapeMount undoes /proc/mounts' octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// waitClosed waits for c to close; what names the wait in the error.
func waitClosed(c chan struct{}, d time.Duration, what string) error {
	select {
	case <-c:
		return nil
	case <-time.After(d):
		return fmt.Errorf("waited %v for %s", d, what)
	}
}

// procStat is the part of /proc/PID/stat the harness needs.
type procStat struct {
	state byte
	ppid  int
}

// readStat parses /proc/PID/stat or /proc/PID/task/TID/stat. The command
// name may hold spaces and parentheses, so the fields start after the last
// ')'.
func readStat(path string) (procStat, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil || len(f[0]) != 1 {
		return procStat{}, false
	}
	return procStat{state: f[0][0], ppid: ppid}, true
}

// allStopped reports whether every thread of pid is stopped (want true) or
// none is (want false). A process that is gone counts as done either way.
func allStopped(pid int, want bool) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return true
	}
	for _, task := range tasks {
		st, ok := readStat(task)
		if !ok || st.state == 'Z' || st.state == 'X' {
			continue
		}
		if stopped := st.state == 'T' || st.state == 't'; stopped != want {
			return false
		}
	}
	return true
}

// waitStopped waits until every thread of every pid is stopped (want) or
// running again (!want). Signals are delivered asynchronously: SIGSTOP has
// done its work only when the scheduler has parked each thread.
func waitStopped(pids []int, want bool) error {
	deadline := time.Now().Add(stepTimeout)
	for {
		done := true
		for _, pid := range pids {
			if !allStopped(pid, want) {
				done = false
				break
			}
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v: stopped=%v not reached in %v", pids, want, stepTimeout)
		}
		time.Sleep(pollEvery)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	st, ok := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	return ok && st.state != 'Z' && st.state != 'X'
}

// waitGone waits until none of pids is alive. They need not be children of
// this process: a zombie counts as gone (init or its parent reaps it).
func waitGone(pids []int) error {
	deadline := time.Now().Add(stepTimeout)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still alive after %v", left, stepTimeout)
		}
		time.Sleep(pollEvery)
	}
}

// allPIDs lists the processes in /proc.
func allPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// descendants lists the live descendants of pid (not pid itself).
func descendants(pid int) []int {
	parent := map[int]int{}
	for _, p := range allPIDs() {
		if st, ok := readStat(fmt.Sprintf("/proc/%d/stat", p)); ok && st.state != 'Z' {
			parent[p] = st.ppid
		}
	}
	var out []int
	for p := range parent {
		for a := parent[p]; a > 1; a = parent[a] {
			if a == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// inNetns lists the live processes whose network namespace is the one whose
// /proc/PID/ns/net link reads link (e.g. "net:[4026532301]").
func inNetns(link string) []int {
	var out []int
	for _, p := range allPIDs() {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", p)); err == nil && l == link && alive(p) {
			out = append(out, p)
		}
	}
	return out
}

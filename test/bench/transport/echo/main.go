// Command echo measures what the Go runtime adds to a server that answers
// requests the way a FUSE reader does: goroutines blocked in read(2) on one
// descriptor, each answering the request it read with a write(2) before
// reading again, for a client (a child process) that waits -gap between
// requests, as a training script does between files.
//
//	go run ./test/bench/transport/echo [-mode block|yield|poll] [-readers 2] [-n 3000] [-gap 700us]
//
// Modes: block, readers in blocking read(2) (go-fuse v2.12.1's loop); yield,
// the same with a runtime.Gosched every -yield (the patched loop); poll,
// readers on Go's netpoller (O_NONBLOCK, parked in epoll between requests).
// It prints one JSON line: the server's CPU (user+system) per request. Run
// it with GOMAXPROCS above and at the number of readers to see the runtime
// take a blocked reader's P back (docs/benchmarks.md, "FUSE transport").
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func main() {
	mode := flag.String("mode", "yield", "block, yield or poll")
	readers := flag.Int("readers", 2, "reader goroutines")
	n := flag.Int("n", 3000, "requests")
	gap := flag.Duration("gap", 700*time.Microsecond, "the client's pause between requests")
	yield := flag.Duration("yield", 8*time.Millisecond, "yield period (mode yield)")
	client := flag.Bool("client", false, "run as the client (internal)")
	flag.Parse()
	if *client {
		runClient(*n, *gap)
		return
	}
	if err := runServer(*mode, *readers, *n, *gap, *yield); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

// runClient sends a byte, waits for the answer, spins gap (a CPU-bound
// pause, as a training step), n times.
func runClient(n int, gap time.Duration) {
	req, rep := os.NewFile(3, "req"), os.NewFile(4, "rep")
	b := make([]byte, 1)
	for range n {
		req.Write(b)
		rep.Read(b)
		for t := time.Now(); time.Since(t) < gap; {
		}
	}
}

func runServer(mode string, readers, n int, gap, yield time.Duration) error {
	var req, rep [2]int
	if err := syscall.Pipe(req[:]); err != nil {
		return err
	}
	if err := syscall.Pipe(rep[:]); err != nil {
		return err
	}
	switch mode {
	case "block", "yield":
		for range readers {
			go func() {
				b := make([]byte, 1)
				last := time.Now()
				for {
					syscall.Read(req[0], b)
					syscall.Write(rep[1], b)
					if mode == "yield" && time.Since(last) > yield {
						runtime.Gosched()
						last = time.Now()
					}
				}
			}()
		}
	case "poll":
		if err := syscall.SetNonblock(req[0], true); err != nil {
			return err
		}
		f := os.NewFile(uintptr(req[0]), "req")
		for range readers {
			go func() {
				b := make([]byte, 1)
				for {
					f.Read(b)
					syscall.Write(rep[1], b)
				}
			}()
		}
	default:
		return fmt.Errorf("-mode %q: want block, yield or poll", mode)
	}
	time.Sleep(100 * time.Millisecond)
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	c := exec.Command(os.Args[0], "-client", "-n", strconv.Itoa(n), "-gap", gap.String())
	c.ExtraFiles = []*os.File{os.NewFile(uintptr(req[1]), "w"), os.NewFile(uintptr(rep[0]), "r")}
	c.Stderr = os.Stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) + syscall.TimevalToNsec(ru1.Stime) -
		syscall.TimevalToNsec(ru0.Utime) - syscall.TimevalToNsec(ru0.Stime))
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"mode": mode, "readers": readers, "gomaxprocs": runtime.GOMAXPROCS(0), "requests": n,
		"gap_us": gap.Microseconds(), "cpu_us_per_request": float64(cpu.Microseconds()) / float64(n),
	})
}

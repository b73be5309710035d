// Command delayproxy is an ssh ProxyCommand that adds a fixed one-way delay
// to each direction of the connection: the epoch benchmarks use it to give
// the emulated PFS the latency of a real one (this kernel has no tc netem).
// A request/response round trip then takes 2 × delay more; throughput is not
// limited (chunks are pipelined, each held for the delay).
//
//	ssh -o ProxyCommand='delayproxy -delay 1ms %h %p' ...
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

type chunk struct {
	at  time.Time
	buf *[]byte // from bufs, given back once written
	n   int
}

// bufs holds the read buffers: a chunk's buffer is reused once written, so
// that the proxy's own CPU (allocating and zeroing 64 KiB a read, and the
// collections that follow) does not take the cores the client and the
// server share with it on a small machine; a real network's latency costs
// no CPU.
var bufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// pipe copies src to dst, each chunk written delay after it was read.
func pipe(dst io.Writer, src io.Reader, delay time.Duration, done chan<- error) {
	q := make(chan chunk, 4096)
	go func() {
		for {
			buf := bufs.Get().(*[]byte)
			n, err := src.Read(*buf)
			if n > 0 {
				q <- chunk{time.Now(), buf, n}
			} else {
				bufs.Put(buf)
			}
			if err != nil {
				close(q)
				return
			}
		}
	}()
	for c := range q {
		if d := time.Until(c.at.Add(delay)); d > 0 {
			time.Sleep(d)
		}
		_, err := dst.Write((*c.buf)[:c.n])
		bufs.Put(c.buf)
		if err != nil {
			done <- err
			return
		}
	}
	done <- nil
}

func main() {
	delay := flag.Duration("delay", time.Millisecond, "one-way delay added to each direction")
	flag.Usage = func() { fmt.Fprintln(os.Stderr, "usage: delayproxy [-delay D] HOST PORT") }
	flag.Parse()
	if flag.NArg() != 2 || *delay < 0 {
		flag.Usage()
		os.Exit(2)
	}
	conn, err := net.Dial("tcp", net.JoinHostPort(flag.Arg(0), flag.Arg(1)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "delayproxy: %v\n", err)
		os.Exit(1)
	}
	done := make(chan error, 2)
	go pipe(conn, os.Stdin, *delay, done)
	go pipe(os.Stdout, conn, *delay, done)
	// Either side closing ends the session.
	if err := <-done; err != nil {
		fmt.Fprintf(os.Stderr, "delayproxy: %v\n", err)
	}
	conn.Close()
}

// Command durs prints a Go duration (its argument) in whole seconds, for
// shell scripts.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: durs DURATION")
		os.Exit(2)
	}
	d, err := time.ParseDuration(os.Args[1])
	if err != nil || d <= 0 {
		fmt.Fprintf(os.Stderr, "durs: %q: want a positive duration such as 30m or 2h\n", os.Args[1])
		os.Exit(2)
	}
	fmt.Println(int64(d.Seconds()))
}

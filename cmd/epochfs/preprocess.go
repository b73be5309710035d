package main

import "io"

// runPreprocess is built by the preprocessing issue.
func runPreprocess(args []string, stdout, stderr io.Writer) error {
	return runtimeErr("not built yet")
}

package main

import "io"

// runModel is built by the model issue.
func runModel(args []string, stdout, stderr io.Writer) error {
	return runtimeErr("not built yet")
}

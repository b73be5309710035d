package main

import "io"

func runMount(args []string, stdout, stderr io.Writer) error   { return runtimeErr("not built yet") }
func runUnmount(args []string, stdout, stderr io.Writer) error { return runtimeErr("not built yet") }
func runStatus(args []string, stdout, stderr io.Writer) error  { return runtimeErr("not built yet") }
func runWarmup(args []string, stdout, stderr io.Writer) error  { return runtimeErr("not built yet") }

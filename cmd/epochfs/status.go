package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func runStatus(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("status", "status [--json] MOUNTPOINT", stderr)
	asJSON := f.Bool("json", false, "print one JSON object")
	pos, err := parseFlags(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("want one MOUNTPOINT")
	}
	name := "status"
	if *asJSON {
		name = "stats.json"
	}
	data, err := os.ReadFile(filepath.Join(pos[0], ".epochfs", name))
	if err != nil {
		return runtimeErr("%s is not an epochfs mount or its daemon does not answer: %v", pos[0], err)
	}
	_, err = stdout.Write(data)
	return err
}

// readStatus reads MOUNT/.epochfs/status into a map.
func readStatus(mnt string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(mnt, ".epochfs", "status"))
	if err != nil {
		return nil, err
	}
	return parseKV(data), nil
}

// parseKV parses key=value lines.
func parseKV(data []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			m[k] = v
		}
	}
	return m
}
